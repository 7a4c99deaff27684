"""Fused OpenCL kernels from a :class:`~polyfuse.fusion.plan.FusionPlan` (docs/fusion.md).

Each :class:`~polyfuse.fusion.plan.FusedGroup` becomes one ``__kernel``; each of its fragments is a
copy of the original kernel's body, placed by its re-indexing map:

* **Scoping.**  The body becomes its own ``{ ... }`` block, so private names never clash between
  fragments.  Buffer (and ``__local`` pointer) parameters are renamed ``f<k>_<name>`` and become
  parameters of the fused kernel bound to the original buffers (one buffer may be bound to several
  parameters; OpenCL allows that).  ``__local`` arrays are hoisted to kernel scope (OpenCL only
  allows them there) and renamed the same way, so each fragment keeps its own tile.
* **Work-item functions** of the fragment are replaced by C expressions of the fused work-item
  functions, computed by isl from the re-indexing map (:mod:`polyfuse.codegen.exprs`); the
  original local size, group count and global size become constants (or host expressions).
* **Scalar arguments** the host fixes are constant-propagated (the literal replaces the
  parameter); symbolic ones become scalar parameters of the fused kernel, shared by every
  fragment bound to the same host expression (so the polyhedral model of the fused kernel sees
  one ``n``, which the post-fusion optimizations rely on).
* ``return`` is rewritten structurally (the statements after ``if (c) return;`` move under
  ``if (!(c))``): a fragment must fall through to the next one, and neither the polyhedral
  front-end nor the interpreter accepts ``goto``.
* **Guards.**  A fragment runs on the domain of its re-indexing map, as an ``if`` on the fused
  work-item ids.  A barrier is never put under any guard: a fragment with barriers has its guard
  pushed below its barriers (:mod:`polyfuse.codegen.barrier_guard`); where the guard leaves
  some work-items of a group out, the headers around the barriers must be the same for every
  work-item of a group, else generation refuses, naming the group.  ``barrier_before`` puts a
  work-group barrier at kernel top level (reached by all).
* **Orchestration.**  ``vertical``/``single``/``hybrid`` run the fragments in sequence in each
  work-item; ``horizontal`` branches on the group id (``if (...) {..} else if (...) {..}``).
  With optimizations on, independent fragments with the same barrier skeleton are merged into
  one body that shares their barriers (code motion, :mod:`polyfuse.codegen.motion`).

* **Helpers** that ask for their work-item are copied per fragment (``pf_g<group>_f<k>_<name>``)
  with their work-item functions re-indexed like the body's.
* **Unknown scalars** (a value the host does not show, e.g. a float read at run time) are each
  launch's own (:func:`~polyfuse.core.program.unknown_arg`): never shared by parameter name.
* **Refusals split, never fail.**  A group of several launches that cannot be produced (any
  refusal while assembling it, or a fused kernel the compiler rejects) is split into its launches
  (:func:`polyfuse.fusion.certify.split_groups`, ``Refused.CODEGEN``, with the refusal as the
  reason) and generation goes on; ``FusedProgram.plan`` is the plan as generated.  A group of
  one launch whose re-indexed form is refused runs as written (its NDRange, its own work-item
  functions, no guard).

The fused NDRange is the bounding box of the re-indexing domains, in whole work-groups, and is
checked against the target's limits.  Post-fusion optimizations are in
:mod:`polyfuse.codegen.optimize`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Optional, Union

import islpy as isl
import sympy
from pycparser import c_ast

from polyfuse.c import emit, preprocessor, printer, syntax, types
from polyfuse.codegen import barrier_guard, exprs, store_order, wavefront
from polyfuse.codegen.decisions import (
    CodeMotion,
    FragmentPartial,
    FragmentPlaced,
    KernelNote,
    NoWavefront,
    WavefrontLaunch,
)
from polyfuse.codegen.models import KernelModels
from polyfuse.core.islutil import coalesce
from polyfuse.core.program import (
    WORK_ITEM_FUNCTIONS,
    ArgBinding,
    Kernel,
    Launch,
    PolyfuseError,
    Program,
    Target,
    UnsupportedError,
    host_expr_to_isl,
    shared_runtime_options,
)
from polyfuse.fusion.decisions import Refused, WavefrontSchedule
from polyfuse.fusion.plan import Fragment, FusedGroup, FusionPlan

if TYPE_CHECKING:  # the UAR's records, for annotations (imported where used)
    from polyfuse.uar.effects import Instantiation

_BARRIER_FUNCS = ("barrier", "work_group_barrier")
_FENCE_ALL = "CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE"
_RESERVED = re.compile(r"^(pf_|f\d+_|F_[hgl]\d)")


class CodegenError(PolyfuseError):
    """A plan that cannot be turned into correct OpenCL (names the plan group)."""


@dataclass(frozen=True)
class FusedKernel:
    """What code generation made of one plan group: its kernel and how it is launched."""

    #: the plan group's id
    group: int
    #: name of the generated kernel
    kernel: str
    #: the NDRange it is launched on (global sizes may be host expressions)
    global_size: tuple[Any, ...]
    local_size: tuple[int, ...]
    #: code generation's decisions on the group (fragments, code motion, wavefront launch
    #: fusion; polyfuse.codegen.decisions), rendered after the plan's notes by polyfuse.report
    notes: tuple[KernelNote, ...] = ()


@dataclass(frozen=True)
class FusedProgram:
    """The result of :func:`generate_fused` (see the module docstring)."""

    #: OpenCL C 1.2 source of every fused kernel (with helper functions)
    source: str
    #: the fused program: same buffers, host ops, one launch per group
    program: Program
    #: the plan it was generated from: the one given, except that a group of several launches
    #: code generation cannot produce is split into its launches (``Refused.CODEGEN``)
    plan: FusionPlan
    #: one per plan group, in the plan's group order
    groups: tuple[FusedKernel, ...]
    #: kernel launches executed by ``program`` (the plan's, lowered by wavefront launch fusion)
    launches_after: Any
    #: post-fusion optimizations that fired, e.g. {"barriers_removed": 2, "details": {...}}
    optimizations: Mapping[str, Any] = field(default_factory=dict)
    #: root buffers whose intermediate stores were eliminated: their final contents are not
    #: meaningful any more (nothing reads them), so verification must not compare them
    dropped_buffers: tuple[str, ...] = ()
    #: (first line, last line) of each group's kernel in ``source``
    kernel_lines: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    #: group id -> its wavefront (groups run one launch per wavefront step, in ``program``)
    wavefronts: Mapping[int, Any] = field(default_factory=dict)

    @property
    def group_kernels(self) -> dict[int, str]:
        """Plan group id -> fused kernel name."""
        return {g.group: g.kernel for g in self.groups}

    def group(self, gid: int) -> FusedKernel:
        """The generated kernel of plan group ``gid``."""
        return next(g for g in self.groups if g.group == gid)

    @property
    def compared_buffers(self) -> tuple[str, ...]:
        """Root buffers whose final contents must match the unfused program."""
        roots = {self.program.root(n)[0] for n in self.program.buffers}
        return tuple(sorted(roots - set(self.dropped_buffers)))


# ----------------------------------------------------------------------------------------------
# AST utilities
# ----------------------------------------------------------------------------------------------


def _neg(cond: c_ast.Node) -> c_ast.Node:
    return c_ast.UnaryOp("!", cond)


_items = syntax.block_items


def eliminate_returns(items: list[Any], where: str) -> list[Any]:
    """Statements equivalent to ``items`` without ``return`` (a fragment must fall through).

    ``S; if (c) {A; return;} R`` becomes ``S; if (c) {A} else {R}``; when a branch may fall
    through, the rest ``R`` is moved into both branches (as its own block, so its declarations
    stay scoped).  A ``return`` inside a loop or switch is refused.
    """
    out: list[Any] = []
    for i, s in enumerate(items):
        if not syntax.has_return(s):
            out.append(s)
            continue
        rest = items[i + 1:]
        if isinstance(s, c_ast.Return):
            return out
        if isinstance(s, c_ast.If):
            used_rest = syntax.identifiers(c_ast.Compound(rest)) if rest else set()
            for br in (s.iftrue, s.iffalse):
                clash = {n for n in _top_decls(br)} & used_rest
                if clash:
                    raise UnsupportedError(f"{where}: cannot move the code after a return "
                                           f"under the branch that declares {sorted(clash)[0]}")
            tail = [c_ast.Compound(syntax.clone(rest))] if rest else []
            t = eliminate_returns(_items(s.iftrue) + tail, where)
            tail = [c_ast.Compound(syntax.clone(rest))] if rest else []
            e = eliminate_returns(_items(s.iffalse) + tail, where)
            if not t and e:
                out.append(c_ast.If(_neg(s.cond), c_ast.Compound(e), None, s.coord))
            elif t or e:
                out.append(c_ast.If(s.cond, c_ast.Compound(t), c_ast.Compound(e) if e else None,
                                    s.coord))
            return out
        if isinstance(s, c_ast.Compound):
            tail = [c_ast.Compound(rest)] if rest else []
            clash = _top_decls(s) & (syntax.identifiers(c_ast.Compound(rest)) if rest else set())
            if clash:
                raise UnsupportedError(f"{where}: cannot move the code after a return into a "
                                       f"block that declares {sorted(clash)[0]}")
            out.append(c_ast.Compound(eliminate_returns(_items(s) + tail, where), s.coord))
            return out
        line = getattr(getattr(s, "coord", None), "line", "?")
        raise UnsupportedError(f"{where}: return inside a loop or switch (line {line}) cannot be "
                               "fused")
    return out


def _top_decls(stmt: Any) -> set[str]:
    return {s.name for s in _items(stmt) if isinstance(s, c_ast.Decl) and s.name}


class _Printer(printer.OpenCLGenerator):
    """OpenCL printer that puts a comment line before registered statements."""

    def __init__(self, comments: Mapping[int, str]):
        super().__init__()
        self.comments = comments

    def _generate_stmt(self, n: c_ast.Node, add_indent: bool = False) -> str:
        text = super()._generate_stmt(n, add_indent)
        note = self.comments.get(id(n))
        if note is None:
            return text
        if add_indent:
            self.indent_level += 2
        indent = self._make_indent()
        if add_indent:
            self.indent_level -= 2
        return f"{indent}/* {note} */\n{text}"


# ----------------------------------------------------------------------------------------------
# Literals
# ----------------------------------------------------------------------------------------------


def literal(value: Any, ctype: str) -> c_ast.Node:
    """A C literal of ``value`` with the type of the parameter it replaces."""
    v = sympy.sympify(value)
    if ctype in ("float", "half"):
        import numpy as np

        f = float(np.float32(float(v)))
        text = repr(f)
        if "e" not in text and "." not in text and "inf" not in text and "nan" not in text:
            text += ".0"
        return c_ast.Constant("float", text + "f")
    if ctype == "double":
        return c_ast.Constant("double", repr(float(v)))
    if not v.is_integer:
        raise UnsupportedError(f"value {v} for a {ctype} parameter is not an integer")
    return exprs.cast(ctype, exprs.int_const(int(v)))


# ----------------------------------------------------------------------------------------------
# Kernel assembly
# ----------------------------------------------------------------------------------------------


@dataclass
class _Param:
    """One parameter of the fused kernel and what the host binds to it."""

    decl: str  # C declaration text
    name: str
    binding: ArgBinding  # index filled later


@dataclass
class _KernelBuilder:
    """Shared state while one group's kernel is assembled."""

    group: FusedGroup
    plan: FusionPlan
    name: str
    n_h: int
    wd: int
    loops: tuple
    params: list[_Param] = field(default_factory=list)
    symbolic: dict[tuple[str, str], str] = field(default_factory=dict)  # (expr, type) -> name
    local_decls: list[Any] = field(default_factory=list)
    local_bytes: int = 0
    comments: dict[int, str] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)
    helpers: dict[str, c_ast.FuncDef] = field(default_factory=dict)
    notes: list[KernelNote] = field(default_factory=list)
    #: fused param name -> (root buffer, byte offset, element type) for buffer params
    buffer_params: dict[str, tuple[str, Any, str]] = field(default_factory=dict)
    #: (root buffer, byte offset, element type) -> the one ``__global`` pointer parameter
    pointer_of: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: code motion that fired: (detail, barrier statements saved)
    motion: list[tuple[str, int]] = field(default_factory=list)
    #: ids of the barrier statements fusion put between fragments (``barrier_before``): the only
    #: ones redundant-barrier removal examines
    fusion_barriers: set[int] = field(default_factory=set)
    #: models and isl answers shared by the groups of one program (identical layers)
    models: KernelModels = field(default_factory=KernelModels)
    #: the fused NDRange: (global size, local size) per dimension, host expressions
    grid: tuple[tuple[Any, ...], tuple[int, ...]] = ((), ())
    #: a group of one launch run as written: its NDRange and work-item functions, no guard
    original: bool = False

    @property
    def where(self) -> str:
        return f"plan group {self.group.id} ({self.name})"

    def symbol_param(self, expr: Any, ctype: str = "int") -> str:
        """The fused kernel's scalar parameter holding host expression ``expr``."""
        expr = sympy.sympify(expr)
        key = (sympy.srepr(expr), ctype)
        if key in self.symbolic:
            return self.symbolic[key]
        base = re.sub(r"\W+", "_", str(expr)).strip("_") or "v"
        name = f"pf_{base}"
        taken = {p.name for p in self.params} | set(self.symbolic.values())
        if name in taken:
            name = f"{name}_{ctype.replace(' ', '_')}"
        k = 1
        while name in taken:
            name = f"pf_{base}_{k}"
            k += 1
        self.symbolic[key] = name
        self.params.append(_Param(f"const {ctype} {name}", name,
                                  ArgBinding(0, "scalar", value=expr)))
        return name

    def ids(self, name: str) -> c_ast.Node:
        """C for an isl id: fused work-item dims or a host parameter."""
        if name.startswith(exprs.G_PREFIX):
            return exprs.work_item_call("get_group_id", int(name[len(exprs.G_PREFIX):]))
        if name.startswith(exprs.L_PREFIX):
            return exprs.work_item_call("get_local_id", int(name[len(exprs.L_PREFIX):]))
        if name.startswith(exprs.H_PREFIX):
            i = int(name[len(exprs.H_PREFIX):])
            return c_ast.ID(self.symbol_param(sympy.Symbol(self.loops[i].iterator)))
        return c_ast.ID(self.symbol_param(sympy.Symbol(name)))


def _dim_names(n_h: int, wd: int) -> list[str]:
    return ([f"{exprs.H_PREFIX}{i}" for i in range(n_h)]
            + [f"{exprs.G_PREFIX}{d}" for d in range(wd)]
            + [f"{exprs.L_PREFIX}{d}" for d in range(wd)])


def _root_offset(program: Program, buffer: str) -> tuple[str, Any]:
    root, off = program.root(buffer)
    return root, sympy.simplify(off)


def _orig_local_size(launch: Launch, inst_ls: tuple[int, ...]) -> list[int]:
    if inst_ls and len(inst_ls) == launch.work_dim:
        return [int(x) for x in inst_ls]
    if launch.local_size is not None:
        return [int(sympy.sympify(x)) for x in launch.local_size]
    return [1] * launch.work_dim


def _fragment(kb: _KernelBuilder, k: int, frag: Fragment, box: isl.Set,
              inst: Instantiation) -> tuple[list[Any], isl.Set, bool]:
    """The statements of fragment ``k`` (unguarded), its domain, whether it has barriers."""
    launch, kernel, where = _fragment_launch(kb, k, frag)
    facts: _BodyFacts = kb.models.answer(("body", id(kernel.ast.body)),
                                         lambda: _body_facts(kernel.ast.body))
    if facts.reserved:
        raise UnsupportedError(f"{where}: identifier {facts.reserved!r} clashes with names "
                               "polyfuse generates (pf_*, f<k>_*)")
    fd: c_ast.FuncDef = syntax.clone(kernel.ast)
    body = fd.body
    work_items: Callable[[str, Optional[int]], c_ast.Node] = (
        _original_work_item if kb.original
        else _WorkItems(kb, k, launch, inst.ops[launch.id], frag, box, where))
    copies = _collect_helpers(kb, k, launch, kernel, body, work_items, where)
    renames, scalar_subst, local_copies = _bind_params(kb, k, kernel, launch, fd, facts, where)
    renames.update(copies)
    if facts.local_decls:
        renames.update(_hoist_locals(kb, k, kernel, body, renames, where))
    else:
        _count_locals(kb, kernel)
    body = _rewrite_body(body, renames, scalar_subst, work_items, where)
    items = list(body.block_items or [])
    if facts.returns:
        items = eliminate_returns(items, where)
    items = local_copies + items
    has_barrier = facts.barriers or bool(kernel.barriers)
    loc = f"{launch.loc.file.rsplit('/', 1)[-1]}:{launch.loc.line}" if launch.loc else None
    kb.notes.append(FragmentPlaced(k, launch.id, kernel.name, loc))
    return items, box if kb.original else work_items.domain, has_barrier


def _original_work_item(func: str, d: Optional[int]) -> c_ast.Node:
    """``func(d)`` as written: the launch runs on its own NDRange."""
    return c_ast.FuncCall(c_ast.ID(func),
                          c_ast.ExprList([c_ast.Constant("int", str(d))]) if d is not None
                          else None)


@dataclass(frozen=True)
class _BodyFacts:
    """What codegen asks of a kernel's body before it rewrites a copy: the same for every copy,
    so asked once per body (the layers of a model share their kernels' bodies)."""

    #: an identifier that clashes with the names polyfuse generates (the first in name order)
    reserved: Optional[str]
    declared: frozenset[str]
    modified: frozenset[str]
    #: a ``return`` anywhere (else there is nothing for :func:`eliminate_returns` to rewrite)
    returns: bool
    #: a barrier call anywhere (re-indexing and renaming keep calls to barriers as they are)
    barriers: bool
    #: a ``__local`` declaration anywhere (else there is nothing to hoist)
    local_decls: bool


def _body_facts(body: c_ast.Node) -> _BodyFacts:
    clash = sorted(n for n in syntax.identifiers(body) if _RESERVED.match(n))
    return _BodyFacts(
        clash[0] if clash else None, frozenset(syntax.declared(body)),
        frozenset(syntax.modified(body)), syntax.has_return(body),
        syntax.calls_any(body, _BARRIER_FUNCS),
        any(isinstance(n, c_ast.Decl) and preprocessor.address_space_of(n) == "local"
            for n in syntax.walk(body)))


def _fragment_launch(kb: _KernelBuilder, k: int, frag: Fragment) -> tuple[Launch, Kernel, str]:
    """The launch and kernel a fragment runs, and how errors name it."""
    program: Program = kb.plan.program
    try:
        launch = program.op(frag.launch)
    except KeyError:
        raise CodegenError(f"{kb.where}: fragment {k} names launch {frag.launch}, which is not "
                           "in the program") from None
    if not isinstance(launch, Launch):
        raise CodegenError(f"{kb.where}: fragment {k}: op {frag.launch} is not a kernel launch")
    kernel: Kernel = program.kernels[launch.kernel]
    if kernel.ast is None:
        raise CodegenError(f"{kb.where}: kernel {kernel.name} has no syntax tree to fuse")
    return launch, kernel, f"{kb.where}, fragment {k} (launch #{launch.id} {kernel.name})"


def _collect_helpers(kb: _KernelBuilder, k: int, launch: Launch, kernel: Kernel, body: Any,
                     work_items: Callable[[str, Optional[int]], c_ast.Node], where: str
                     ) -> dict[str, str]:
    """The kernel's helper functions, emitted once before the fused kernels (two files' must
    agree); the renames of fragment ``k``'s own copies.

    A helper that uses work-item functions (itself or through a helper it calls) answers them
    for the launch that calls it, so the fragment gets its own copy, ``pf_g<group>_f<k>_<name>``,
    with its work-item functions re-indexed as the kernel body's are.  One with barriers
    cannot be fused: a fragment's guard could not move into it."""
    helpers = {name: hfd for name, hfd in emit.helper_functions(kernel.helpers).items()
               if hfd is not kernel.ast}
    indexed = _calling(helpers, WORK_ITEM_FUNCTIONS)
    barriers = _calling(helpers, _BARRIER_FUNCS)
    reached = _reached(helpers, body)
    if barriers & reached:
        raise UnsupportedError(f"{where}: helper function {min(barriers & reached)}() uses "
                               "barriers; inline it before fusing")
    copies = {name: f"pf_g{kb.group.id}_f{k}_{name}" for name in helpers
              if name in indexed and name in reached}
    for name, hfd in helpers.items():
        if name in copies:
            own = syntax.clone(hfd)
            syntax.rename(own, copies)
            own.body = _rewrite_body(own.body, {}, {},
                                     _in_helper(work_items, name, _same_grid(kb, launch),
                                                where), where)
            kb.helpers[copies[name]] = own
            continue
        if name in indexed:  # no call reaches it: only the copies are emitted
            continue
        old = kb.helpers.get(name)
        if old is not None and printer.opencl_source(old) != printer.opencl_source(hfd):
            raise UnsupportedError(f"{where}: helper function {name}() differs between fused "
                                   "kernels' files")
        kb.helpers[name] = hfd
    return copies


def _calling(helpers: Mapping[str, c_ast.FuncDef], functions: Iterable[str]) -> set[str]:
    """The helpers that call one of ``functions``, themselves or through other helpers."""
    out: set[str] = set()
    targets = set(functions)
    while True:
        more = {name for name, hfd in helpers.items()
                if name not in out and syntax.calls_any(hfd.body, targets)}
        if not more:
            return out
        out |= more
        targets |= more


def _reached(helpers: Mapping[str, c_ast.FuncDef], body: Any) -> set[str]:
    """The helpers ``body`` calls, directly or through other helpers."""
    out: set[str] = set()
    todo = [n for n in syntax.called(body) if n in helpers]
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo += [n for n in syntax.called(helpers[name].body) if n in helpers]
    return out


def _same_grid(kb: _KernelBuilder, launch: Launch) -> bool:
    """Whether the fused kernel runs exactly on ``launch``'s NDRange (a group of one launch on
    its unchanged grid): its work-item functions then answer as the launch's would."""
    gs, ls = kb.grid
    if len(kb.group.fragments) != 1 or launch.work_dim != len(gs) or launch.local_size is None:
        return False
    if not _identity(kb.group.fragments[0].reindex):
        return False
    if any(sympy.sympify(o) != 0 for o in launch.global_offset or ()):
        return False
    return all(_equal_host(a, b) for a, b in zip(launch.global_size, gs)) \
        and all(sympy.sympify(a) == b for a, b in zip(launch.local_size, ls))


def _identity(reindex: isl.Map) -> bool:
    """Whether a re-indexing map keeps every work-item where it is (a launch on its own grid)."""
    m = reindex.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    return m.dim(isl.dim_type.in_) == m.dim(isl.dim_type.out) and \
        m.is_subset(isl.Map.identity(m.get_space()))


def _equal_host(a: Any, b: Any) -> bool:
    """Whether two host expressions are equal for every value of their parameters (isl decides
    what sympy does not, e.g. nested floors)."""
    a, b = sympy.sympify(a), sympy.sympify(b)
    if sympy.simplify(a - b) == 0:
        return True
    try:
        pa, pb = exprs.host_to_pw_aff(a), exprs.host_to_pw_aff(b)
        pb = pb.align_params(pa.get_space())
        return pa.align_params(pb.get_space()).ne_set(pb).is_empty()
    except (isl.Error, ValueError, TypeError, PolyfuseError):
        return False


def _in_helper(work_items: Callable[[str, Optional[int]], c_ast.Node], helper: str,
               same_grid: bool, where: str) -> Callable[[str, Optional[int]], c_ast.Node]:
    """``work_items`` for a helper's body, where only work-item functions and constants are in
    scope: where the fused grid is the launch's own (``same_grid``) the original calls stay,
    else a re-indexed value that needs the fused kernel's arguments is refused."""

    def answer(func: str, d: Optional[int]) -> c_ast.Node:
        if same_grid:  # the launch's own work-item functions answer
            return _original_work_item(func, d)
        node = work_items(func, d)
        names = {id(n.name) for n in syntax.walk(node) if isinstance(n, c_ast.FuncCall)}
        if any(isinstance(n, c_ast.ID) and id(n) not in names for n in syntax.walk(node)):
            raise UnsupportedError(f"{where}: helper function {helper}() uses {func}(), whose "
                                   "value in the fused kernel needs the kernel's arguments; "
                                   "inline it before fusing")
        return node

    return answer


class _WorkItems:
    """A fragment's work-item functions as C over the fused work-item, by its re-indexing map
    (checked here: valid, single-valued, injective, inside the launch and the fused NDRange).
    The isl part is shared by fragments with the same map, launch domain and fused NDRange (the
    identical layers of a model), through ``kb.models``."""

    def __init__(self, kb: _KernelBuilder, k: int, launch: Launch, oi: Any, frag: Fragment,
                 box: isl.Set, where: str):
        self.kb, self.where = kb, where
        self.wdo = wdo = launch.work_dim
        # the launch's own name (``L<id>``) is no part of the answer: identical layers share it
        key = ("work-items",
               str(frag.reindex.reset_tuple_id(isl.dim_type.out)),
               str(oi.domain.reset_tuple_id()), str(box), kb.n_h, kb.wd, wdo,
               len(oi.host_dims))
        self.domain, self.dom_p, self.comps, partial = kb.models.answer(
            key, lambda: _reindexing(kb, launch, oi, frag, box, where))
        if partial:
            kb.notes.append(FragmentPartial(k, launch.id))
        self.ls = _orig_local_size(launch, tuple(oi.local_size))
        self.gs = [sympy.sympify(x) for x in launch.global_size]
        self.off = [sympy.sympify(x) for x in (launch.global_offset or (0,) * wdo)]
        self.nh_o = len(oi.host_dims)
        self._made: dict[tuple[str, Optional[int]], c_ast.Node] = {}

    def _c(self, pa: isl.PwAff) -> c_ast.Node:
        return exprs.pw_aff_to_c(pa, self.dom_p, self.kb.ids)

    def _host(self, e: Any) -> c_ast.Node:
        e = sympy.sympify(e)
        if e.is_Integer:
            return exprs.int_const(int(e))
        pa = exprs.host_to_pw_aff(e)  # over the parameters; the fused domain is a 0-d set
        pa = pa.insert_domain(isl.Space.set_alloc(pa.get_ctx(), 0, 0))
        return exprs.pw_aff_to_c(pa, self.dom_p, self.kb.ids)

    def __call__(self, func: str, d: Optional[int]) -> c_ast.Node:
        """C for ``func(d)`` of the original launch, in the fused work-item (a new tree per
        call; the expression is made once)."""
        if (func, d) not in self._made:
            self._made[(func, d)] = self._make(func, d)
        return syntax.clone(self._made[(func, d)])

    def _make(self, func: str, d: Optional[int]) -> c_ast.Node:
        wdo, ls, gs, off = self.wdo, self.ls, self.gs, self.off
        if func == "get_work_dim":
            return exprs.cast("uint", exprs.int_const(wdo))
        assert d is not None
        if d >= wdo:
            val = {"get_local_size": 1, "get_num_groups": 1, "get_global_size": 1}.get(func, 0)
            return exprs.cast("size_t", exprs.int_const(val))
        g_pa, l_pa = self.comps[self.nh_o + d], self.comps[self.nh_o + wdo + d]
        if func == "get_group_id":
            node = self._c(g_pa)
        elif func == "get_local_id":
            node = self._c(l_pa)
        elif func == "get_global_id":
            pa = g_pa.scale_val(isl.Val(ls[d])).add(l_pa) if ls[d] != 1 else g_pa.add(l_pa)
            node = self._c(pa)
            if off[d] != 0:  # a host value: a literal or the fused kernel's parameter
                node = c_ast.BinaryOp("+", node, self._host(off[d]))
        elif func == "get_local_size":
            node = exprs.int_const(ls[d])
        elif func == "get_global_size":
            node = self._host(gs[d])
        elif func == "get_num_groups":
            node = self._host(sympy.floor(gs[d] / ls[d]) if not (gs[d] / ls[d]).is_Integer
                              else gs[d] / ls[d])
        elif func == "get_global_offset":
            node = self._host(off[d])
        else:  # pragma: no cover - WORK_ITEM_FUNCTIONS is closed
            raise UnsupportedError(f"{self.where}: {func}() is not supported")
        return exprs.cast("size_t", node)


def _reindexing(kb: _KernelBuilder, launch: Launch, oi: Any, frag: Fragment, box: isl.Set,
                where: str) -> tuple[isl.Set, isl.Set, list[isl.PwAff], bool]:
    """A fragment's re-indexing map checked (module docstring): its domain in the fused space,
    that domain over parameters, the original work-item as parametric expressions, and whether
    some work-items of the launch are not run."""
    rmap = frag.reindex
    n_in = rmap.dim(isl.dim_type.in_)
    n_out = rmap.dim(isl.dim_type.out)
    wdo = launch.work_dim
    if n_in != kb.n_h + 2 * kb.wd:
        raise CodegenError(f"{where}: re-indexing map has {n_in} input dims, the fused "
                           f"space has {kb.n_h + 2 * kb.wd}")
    if n_out != len(oi.host_dims) + 2 * wdo:
        raise CodegenError(f"{where}: re-indexing map has {n_out} output dims, launch "
                           f"#{launch.id} has {len(oi.host_dims) + 2 * wdo} (h, g, l)")
    if not rmap.is_single_valued():
        raise CodegenError(f"{where}: re-indexing map is not single-valued")
    if not rmap.is_injective():
        raise CodegenError(f"{where}: re-indexing map is not injective (two fused "
                           "work-items would run the same original one)")
    names = _dim_names(kb.n_h, kb.wd)
    for i, nm in enumerate(names):
        rmap = rmap.set_dim_name(isl.dim_type.in_, i, nm)
    rmap = rmap.set_tuple_name(isl.dim_type.in_, "F")
    orig_dom = oi.domain.reset_tuple_id()
    rng = rmap.range().reset_tuple_id()
    if not rng.is_subset(orig_dom.align_params(rng.get_space())):
        raise CodegenError(f"{where}: re-indexing map reaches work-items outside launch "
                           f"#{launch.id}'s NDRange")
    partial = not orig_dom.is_subset(rng.align_params(orig_dom.get_space()))
    dom = rmap.domain()
    if not dom.reset_tuple_id().is_subset(
            box.reset_tuple_id().align_params(dom.get_space())):
        raise CodegenError(f"{where}: re-indexing domain is not inside the fused NDRange")
    dom_p = exprs.dims_to_params(dom.reset_tuple_id(), n_in, names)
    pma = isl.PwMultiAff.from_map(rmap)
    comps = [exprs.dims_to_params(pma.get_pw_aff(j), n_in, names, isl.dim_type.in_)
             for j in range(n_out)]
    return dom, dom_p, comps, partial


def _bind_params(kb: _KernelBuilder, k: int, kernel: Kernel, launch: Launch,
                 fd: c_ast.FuncDef, facts: _BodyFacts, where: str
                 ) -> tuple[dict[str, str], dict[str, c_ast.Node], list[Any]]:
    """The fused kernel's parameters for the fragment's arguments: pointers renamed
    ``f<k>_<name>``, scalars replaced by their value (a literal or a ``pf_`` parameter), or a
    private copy where the body assigns or shadows them.  Returns (renames, scalar
    substitutions, private copies)."""
    program: Program = kb.plan.program
    params = fd.decl.type.args.params if fd.decl.type.args else []
    renames: dict[str, str] = {}
    scalar_subst: dict[str, c_ast.Node] = {}
    local_copies: list[Any] = []
    body_decls = facts.declared
    assigned = facts.modified
    for p in kernel.params:
        pdecl = params[p.index]
        try:
            b = launch.arg(p.index)
        except KeyError:
            raise CodegenError(f"{where}: argument {p.index} ({p.name}) is not bound") from None
        new = f"f{k}_{p.name}"
        if p.pointer:
            # one buffer, one pointer: device compilers take two kernel arguments for distinct
            # memory (both PoCL builds read a buffer through a const parameter before the
            # same work-item's store through another had landed), so fragments share it
            key = None
            if b.kind == "buffer" and b.buffer is not None and p.address_space == "global":
                root, o = _root_offset(program, b.buffer)  # views (Reshape aliases) included
                key = (root, str(o), p.type)
            if key is not None and key in kb.pointer_of:
                shared = kb.pointer_of[key]
                renames[p.name] = shared
                if not p.const:  # a writer: the shared declaration must not say const
                    d = syntax.clone(pdecl)
                    syntax.rename(d, {p.name: shared})
                    param = next(q for q in kb.params if q.name == shared)
                    param.decl = printer.opencl_source(d)
                continue
            renames[p.name] = new
            d = syntax.clone(pdecl)
            syntax.rename(d, {p.name: new})
            kb.params.append(_Param(printer.opencl_source(d), new, replace(b)))
            if key is not None:
                kb.pointer_of[key] = new
            if b.kind == "buffer" and b.buffer is not None:
                root, o = _root_offset(program, b.buffer)
                kb.buffer_params[new] = (root, o, p.type)
            elif b.kind == "local" and b.local_bytes is not None:
                lb = sympy.sympify(b.local_bytes)
                kb.local_bytes += int(lb) if lb.is_Integer else 0
            continue
        if b.kind != "scalar":
            raise CodegenError(f"{where}: scalar argument {p.name} is bound to a {b.kind}")
        value = launch.scalar_value(b, p.name)
        if value.is_Number:
            node = literal(value, p.type)
            kb.constants[f"launch {launch.id} {p.name}"] = (
                float(value) if not value.is_Integer else int(value))
        else:
            node = c_ast.ID(kb.symbol_param(value, p.type))
        if p.name in assigned or p.name in body_decls:
            # keep a private copy under the original name (the body assigns it or shadows it)
            d = syntax.clone(pdecl)
            d.init = node
            if p.name in assigned:
                for n in syntax.walk(d):
                    if isinstance(n, c_ast.TypeDecl):
                        n.quals = [q for q in n.quals if q != "const"]
                d.quals = [q for q in d.quals if q != "const"]
            local_copies.append(d)
        else:
            scalar_subst[p.name] = node
    return renames, scalar_subst, local_copies


def _hoist_locals(kb: _KernelBuilder, k: int, kernel: Kernel, body: Any,
                  renames: Mapping[str, str], where: str) -> dict[str, str]:
    """Move the fragment's ``__local`` arrays to kernel scope, renamed ``f<k>_<name>``; the
    new names.  A pointer to ``__local`` memory is a private variable and stays."""
    local_names: dict[str, str] = {}
    for n in syntax.walk(body):
        if isinstance(n, c_ast.Compound) and n.block_items:
            keep = []
            for s in n.block_items:
                if isinstance(s, c_ast.Decl) and preprocessor.address_space_of(s) == "local" \
                        and not isinstance(s.type, c_ast.PtrDecl):  # a pointer is private
                    if s.name in local_names:
                        raise UnsupportedError(f"{where}: two __local arrays named {s.name}")
                    local_names[s.name] = f"f{k}_{s.name}"
                    kb.local_decls.append(s)
                else:
                    keep.append(s)
            n.block_items = keep
    _count_locals(kb, kernel)
    hoisted = kb.local_decls[len(kb.local_decls) - len(local_names):]
    for d in hoisted:
        syntax.rename(d, {**renames, **local_names})
    return local_names


def _count_locals(kb: _KernelBuilder, kernel: Kernel) -> None:
    """Add the kernel's ``__local`` arrays to the fused kernel's ``__local`` bytes."""
    for a in kernel.arrays:
        if a.address_space == "local":
            size = types.type_size(a.type, kernel.struct_sizes) or 4
            kb.local_bytes += size * math.prod(a.shape)


def _rewrite_body(body: Any, renames: Mapping[str, str],
                  scalar_subst: Mapping[str, c_ast.Node],
                  work_items: Callable[[str, Optional[int]], c_ast.Node], where: str) -> Any:
    """The body renamed, scalars substituted and work-item functions re-indexed."""
    syntax.rename(body, renames)
    struct_fields: set[int] = set()
    for n in syntax.walk(body):
        if isinstance(n, c_ast.StructRef):
            struct_fields.add(id(n.field))
        if isinstance(n, c_ast.FuncCall):
            struct_fields.add(id(n.name))

    def sub(n: Any) -> Any:
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and \
                n.name.name in WORK_ITEM_FUNCTIONS:
            args = n.args.exprs if n.args else []
            if n.name.name == "get_work_dim":
                return work_items("get_work_dim", None)
            d = syntax.const_int(args[0]) if args else None
            if d is None:
                raise UnsupportedError(f"{where}: {n.name.name}() with a non-constant "
                                       "dimension cannot be re-indexed")
            return work_items(n.name.name, d)
        if isinstance(n, c_ast.ID) and id(n) not in struct_fields and n.name in scalar_subst:
            return syntax.clone(scalar_subst[n.name])
        return n

    return syntax.transform(body, sub)


def _uniform_part(dom: isl.Set, box: isl.Set, n_h: int, wd: int) -> tuple[isl.Set, bool]:
    """The group-level part of ``dom`` (all local ids in ``box``) and whether it equals ``dom``."""
    start = n_h + wd
    proj = dom.project_out(isl.dim_type.set, start, wd).insert_dims(isl.dim_type.set, start, wd)
    names = _dim_names(n_h, wd)
    for i, nm in enumerate(names):
        proj = proj.set_dim_name(isl.dim_type.set, i, nm)
    proj = proj.set_tuple_name("F")
    b = box.align_params(proj.get_space())
    lifted = proj.intersect(b)
    d = dom.align_params(lifted.get_space())
    return lifted, lifted.is_subset(d)


def _bound(kb: _KernelBuilder, dom: isl.Set, pos: int, which: str, what: str) -> isl.PwAff:
    """``dim_min``/``dim_max`` of one dimension; an unbounded one (a size polyfuse cannot bound,
    such as one read from a device query) is a :class:`CodegenError`, not an isl exception."""
    try:
        return dom.dim_max(pos) if which == "max" else dom.dim_min(pos)
    except isl.Error as err:
        unknown = _unknown_sizes(kb)
        if unknown:
            raise CodegenError(f"{kb.where}: the fused NDRange is unbounded: {unknown}") \
                from None
        raise CodegenError(f"{kb.where}: the fused NDRange has no {which}imum {what} ({err}); a "
                           "launch size polyfuse cannot bound (e.g. read from a device query) "
                           "must be fixed with --param NAME=VALUE") from None


def _unknown_sizes(kb: _KernelBuilder) -> str:
    """The group's first launch whose local or global size is a value the host computes at
    run time, with its host line and the ``--param`` that fixes it ("" when none is)."""
    launches = {op.id: op for op in kb.plan.program.launches}
    for f in kb.group.fragments:
        launch = launches.get(f.launch)
        if launch is None:
            continue
        for what, sizes in (("local", launch.local_size), ("global", launch.global_size)):
            names = sorted({str(s) for x in sizes or () for s in sympy.sympify(x).free_symbols
                            if str(s) in kb.plan.program.params})
            if names:
                at = f" at {launch.loc.file}:{launch.loc.line}" if launch.loc else ""
                shown = ", ".join(str(x) for x in sizes)
                return (f"launch #{launch.id} of '{launch.kernel}'{at} has {what} size "
                        f"({shown}), a value the host reads at run time (a device query, "
                        f"input); pass --param {names[0]}=VALUE, or --verify to answer device "
                        "queries from the verifying device")
    return ""


def _fused_box(kb: _KernelBuilder, doms: list[isl.Set], inst: Instantiation
               ) -> tuple[isl.Set, list[int], list[Any]]:
    """The fused NDRange: local size, group counts (host expressions) and the box set."""
    n_h, wd = kb.n_h, kb.wd
    union = doms[0]
    for d in doms[1:]:
        union = union.union(d.align_params(union.get_space()))
    ctx = inst.context if hasattr(inst, "context") else isl.Set("{ : }")
    if kb.group.local_size is not None:
        ls = [int(x) for x in kb.group.local_size]
    else:
        ls = []
        for d in range(wd):
            mx = _bound(kb, union, n_h + wd + d, "max", f"local id {d}")
            try:
                ls.append(int(exprs.pw_aff_to_sympy(mx, ctx)) + 1)
            except (ValueError, TypeError):
                raise CodegenError(f"{kb.where}: the fused local size is not constant; give it "
                                   "in the plan") from None
    if len(ls) != wd:
        raise CodegenError(f"{kb.where}: local size {tuple(ls)} has {len(ls)} dims, the fused "
                           f"space has {wd}")
    ngroups: list[Any] = []
    for d in range(wd):
        mn = _bound(kb, union, n_h + d, "min", f"group id {d}")
        mx = _bound(kb, union, n_h + d, "max", f"group id {d}")
        try:
            lo = exprs.pw_aff_to_sympy(mn, ctx)
            hi = exprs.pw_aff_to_sympy(mx, ctx)
        except (ValueError, TypeError):
            raise CodegenError(f"{kb.where}: cannot express the fused NDRange in dimension {d} "
                               f"as one host expression (group ids up to {mx})") from None
        if lo.is_Number and lo < 0:
            raise CodegenError(f"{kb.where}: re-indexing domains use negative group ids")
        ngroups.append(sympy.simplify(hi + 1))
    names = _dim_names(n_h, wd)
    cons = []
    for d in range(wd):
        cons.append(f"0 <= {names[n_h + wd + d]} < {ls[d]}")
        cons.append(f"{names[n_h + d]} >= 0")
    box = isl.Set(f"{{ F[{', '.join(names)}] : {' and '.join(cons) or 'true'} }}")
    for d in range(wd):
        if ngroups[d].is_Integer:
            box = box.intersect(isl.Set(f"{{ F[{', '.join(names)}] : {names[n_h + d]} < "
                                        f"{int(ngroups[d])} }}"))
        else:
            box = box.intersect(_lt_set(box, n_h + d, ngroups[d]))
    if n_h:
        # host-loop dims as the fragments' domains have them (guards need not repeat them)
        hpart = union.project_out(isl.dim_type.set, n_h, 2 * wd).insert_dims(
            isl.dim_type.set, n_h, 2 * wd)
        for i, nm in enumerate(names):
            hpart = hpart.set_dim_name(isl.dim_type.set, i, nm)
        hpart = coalesce(hpart.set_tuple_name("F"))
        box = box.align_params(hpart.get_space()).intersect(
            hpart.align_params(box.get_space()))
    return box, ls, ngroups


def _lt_set(box: isl.Set, pos: int, bound: Any) -> isl.Set:
    """``{ F[...] : dim pos < bound }`` for a host-expression bound (params aligned)."""
    text = host_expr_to_isl(bound)
    syms = sorted(str(s) for s in sympy.sympify(bound).free_symbols)
    n = box.dim(isl.dim_type.set)
    names = [box.get_dim_name(isl.dim_type.set, i) for i in range(n)]
    return isl.Set(f"[{', '.join(syms)}] -> {{ F[{', '.join(names)}] : {names[pos]} < {text} }}")


def _barrier_stmt() -> c_ast.Node:
    return c_ast.FuncCall(c_ast.ID("barrier"), c_ast.ExprList([c_ast.ID(_FENCE_ALL)]))


def _frag_domain(frag: Fragment, n_h: int, wd: int, where: str) -> isl.Set:
    rmap = frag.reindex
    if rmap.dim(isl.dim_type.in_) != n_h + 2 * wd:
        raise CodegenError(f"{where}: re-indexing map {frag.reindex} has "
                           f"{rmap.dim(isl.dim_type.in_)} input dims; expected {n_h + 2 * wd} "
                           "(h..., g..., l...)")
    dom = rmap.domain()
    for i, nm in enumerate(_dim_names(n_h, wd)):
        dom = dom.set_dim_name(isl.dim_type.set, i, nm)
    return dom.set_tuple_name("F")


@dataclass
class _GroupCode:
    kb: _KernelBuilder
    func: c_ast.FuncDef
    global_size: tuple[Any, ...]
    local_size: tuple[int, ...]
    position: int  # index in program.ops of the last member


def _assemble_group(plan: FusionPlan, group: FusedGroup, inst: Instantiation,
                    limits: Optional[Target], name: str, code_motion: bool = False,
                    models: Optional[KernelModels] = None, original: bool = False
                    ) -> _GroupCode:
    """One fused kernel: its fragments re-indexed into the group's fused grid, guarded and
    ordered by the group's orchestration.  ``original``: a group of one launch kept as the
    launch runs (its NDRange, its own work-item functions, no guard)."""
    where = f"plan group {group.id}"
    last_pos, n_h, wd = _group_frame(plan.program, group, where)
    kb = _KernelBuilder(group, plan, name, n_h, wd, tuple(plan.program.ops[last_pos].loops),
                        models=models or KernelModels())
    doms = [_frag_domain(f, n_h, wd, f"{where}, fragment {k + 1}")
            for k, f in enumerate(group.fragments)]
    box, ls, ngroups = _fused_box(kb, doms, inst)
    kb.grid = (tuple(sympy.simplify(ngroups[d] * ls[d]) for d in range(wd)), tuple(ls))
    if original:
        launch = plan.program.op(group.fragments[0].launch)
        if len(group.fragments) != 1 or launch.local_size is None or launch.work_dim != wd or \
                any(sympy.sympify(o) != 0 for o in launch.global_offset or ()) or \
                not all(sympy.sympify(x).is_Integer for x in launch.local_size):
            raise CodegenError(f"{where}: the launch cannot run as written in a fused kernel "
                               "(no fixed local size, or a global offset)")
        ls = [int(sympy.sympify(x)) for x in launch.local_size]
        kb.grid = (tuple(sympy.sympify(x) for x in launch.global_size), tuple(ls))
        kb.original = True
    _check_work_group(where, ls, limits)
    frags = []
    for k, (f, dom) in enumerate(zip(group.fragments, doms), start=1):
        items, _, has_bar = _fragment(kb, k, f, box, inst)
        frags.append((k, f, dom, items, has_bar))
    if limits is not None and kb.local_bytes > limits.local_mem_size:
        raise CodegenError(f"{where}: the fused kernel needs {kb.local_bytes} bytes of __local "
                           f"memory; the device has {limits.local_mem_size}")
    n_in = n_h + 2 * wd
    box_p = exprs.dims_to_params(box.reset_tuple_id(), n_in, _dim_names(n_h, wd))
    if group.orchestration == "horizontal":
        body = _horizontal_body(kb, frags, box, box_p, where)
    else:
        body = _sequential_body(kb, frags, box, box_p, where, code_motion)
    # kernel scope: hoisted __local arrays first
    items = list(kb.local_decls) + body
    func = c_ast.FuncDef(decl=None, param_decls=None, body=c_ast.Compound(items))
    store_order.order_sibling_stores(func.body, {name: etype for name, (_, _, etype)
                                                 in kb.buffer_params.items()})
    gsz = kb.grid[0]
    return _GroupCode(kb, func, gsz, tuple(ls), last_pos)


def _group_frame(program: Program, group: FusedGroup, where: str) -> tuple[int, int, int]:
    """(position of the group's last member among the host ops, host loops, NDRange
    dimensions) of a group, checked against the program and the re-indexing maps."""
    if not group.fragments:
        raise CodegenError(f"{where}: no fragments")
    positions = {op.id: i for i, op in enumerate(program.ops)}
    for f in group.fragments:
        if f.launch not in positions:
            raise CodegenError(f"{where}: launch {f.launch} is not in the program")
    last_pos = max(positions[f.launch] for f in group.fragments)
    n_h = len(program.ops[last_pos].loops)
    n_in = group.fragments[0].reindex.dim(isl.dim_type.in_)
    if (n_in - n_h) % 2 or n_in < n_h:
        raise CodegenError(f"{where}: fused space has {n_in} dims, not h({n_h}) + g + l")
    wd = (n_in - n_h) // 2
    if not 1 <= wd <= 3:
        raise CodegenError(f"{where}: fused NDRange has {wd} dimensions (1..3 allowed)")
    if group.orchestration not in ("single", "vertical", "horizontal", "hybrid"):
        raise CodegenError(f"{where}: unknown orchestration {group.orchestration!r}")
    return last_pos, n_h, wd


def _check_work_group(where: str, ls: list[int], limits: Optional[Target]) -> None:
    """The fused local size within the target's limits (a device's are queried by the
    runtime, never hard-coded)."""
    if limits is None:
        return
    wg = math.prod(ls)
    if wg > limits.max_work_group_size:
        raise CodegenError(f"{where}: fused local size {tuple(ls)} ({wg} work-items) exceeds "
                           f"the device's max work-group size {limits.max_work_group_size}")
    for d, x in enumerate(ls):
        if d < len(limits.max_work_item_sizes) and x > limits.max_work_item_sizes[d]:
            raise CodegenError(f"{where}: local size {x} in dimension {d} exceeds the "
                               f"device's {limits.max_work_item_sizes[d]}")


def _fragment_comment(program: Program, k: int, f: Fragment) -> str:
    launch = program.op(f.launch)
    loc = f" ({launch.loc.file.rsplit('/', 1)[-1]}:{launch.loc.line})" if launch.loc else ""
    return f"fragment {k}: launch #{launch.id} {launch.kernel}{loc}"


def _horizontal_body(kb: _KernelBuilder, frags: list[tuple], box: isl.Set, box_p: isl.Set,
                     where: str) -> list[Any]:
    """Horizontal orchestration: each fragment runs in its own work-groups, chosen by an
    ``if``/``else if`` chain on the group ids."""
    n_h, wd = kb.n_h, kb.wd
    n_in, names = n_h + 2 * wd, _dim_names(n_h, wd)
    program: Program = kb.plan.program
    body: list[Any] = []
    chain: list[tuple[Optional[c_ast.Node], c_ast.Node, str]] = []
    seen: Optional[isl.Set] = None
    for k, f, dom, items, has_bar in frags:
        gpart, uniform = _uniform_part(dom, box, n_h, wd)
        if seen is not None and not gpart.intersect(
                seen.align_params(gpart.get_space())).is_empty():
            raise CodegenError(f"{where}: horizontal fragments {k} and an earlier one share "
                               "work-groups; use vertical or hybrid orchestration")
        seen = gpart if seen is None else seen.union(gpart.align_params(seen.get_space()))
        if has_bar and not uniform:
            raise CodegenError(f"{where}: fragment {k} has barriers but its domain does not "
                               "cover whole work-groups; a barrier would be under "
                               "work-item-dependent control flow")
        outer = exprs.set_to_c(exprs.dims_to_params(gpart.reset_tuple_id(), n_in, names),
                               box_p, kb.ids)
        block: c_ast.Node = c_ast.Compound(items)
        if not uniform:
            gp = exprs.dims_to_params(gpart.reset_tuple_id(), n_in, names)
            inner = exprs.set_to_c(exprs.dims_to_params(dom.reset_tuple_id(), n_in, names),
                                   gp.intersect(box_p.align_params(gp.get_space())),
                                   kb.ids)
            if inner is not None:
                block = c_ast.Compound([c_ast.If(inner, block, None)])
        chain.append((outer, block, _fragment_comment(program, k, f)))
    stmt: Optional[c_ast.Node] = None
    for outer, block, note in reversed(chain):
        if outer is None:
            if stmt is not None:
                raise CodegenError(f"{where}: a horizontal fragment covers every group")
            stmt = block
        else:
            stmt = c_ast.If(outer, block, stmt)
        kb.comments[id(block)] = note
    assert stmt is not None
    body.append(stmt)
    if isinstance(stmt, c_ast.If):
        kb.comments[id(stmt)] = "horizontal: " + "; ".join(n for _, _, n in chain)
    return body


def _sequential_body(kb: _KernelBuilder, frags: list[tuple], box: isl.Set, box_p: isl.Set,
                     where: str, code_motion: bool) -> list[Any]:
    """Vertical, single and hybrid orchestration: the fragments in sequence in every
    work-item, each under its guard, a barrier before a fragment with a block edge into it;
    with ``code_motion`` fragments of the same barrier skeleton share their barriers."""
    from polyfuse.codegen import motion

    n_h, wd = kb.n_h, kb.wd
    n_in, names = n_h + 2 * wd, _dim_names(n_h, wd)
    program: Program = kb.plan.program
    group, plan = kb.group, kb.plan
    body: list[Any] = []
    seq: list[Any] = [motion.FragCode(k, f, dom, items, has_bar)
                      for k, f, dom, items, has_bar in frags]
    if code_motion and len(seq) > 1:
        seq, why = motion.share_barriers(seq, program, plan.uar,
                                         frozenset(kb.symbolic.values()))
        kb.notes.extend(why)
    for entry in seq:
        if isinstance(entry, motion.Merged):
            ms = entry.members
            k, f, dom, items, has_bar = ms[0].k, ms[0].frag, ms[0].dom, entry.items, True
            text = ", ".join(str(m.k) for m in ms)
            launches = ", ".join(
                f"#{m.frag.launch} {program.op(m.frag.launch).kernel}" for m in ms)
            shared = (f"share {entry.barriers} barriers "
                      f"({entry.barriers + entry.saved} -> {entry.barriers})")
            label = f"fragments {text}: {launches}; code motion: {shared}"
            kb.motion.append((f"group {group.id}: fragments {text} ({launches}) {shared}",
                              entry.saved))
            kb.notes.append(CodeMotion(tuple(m.k for m in ms), entry.barriers, entry.saved))
        else:
            k, f, dom, items, has_bar = (entry.k, entry.frag, entry.dom, entry.items,
                                         entry.has_barrier)
            label = _fragment_comment(program, k, f)
        if f.barrier_before and k > 1:
            bar = _barrier_stmt()
            kb.comments[id(bar)] = f"block edge into fragment {k}"
            kb.fusion_barriers.add(id(bar))
            body.append(bar)
        d_p = exprs.dims_to_params(dom.reset_tuple_id(), n_in, names)
        guard = None if kb.original else exprs.set_to_c(d_p, box_p, kb.ids)
        if guard is not None and has_bar:
            _, uniform = _uniform_part(dom, box, n_h, wd)
            try:
                stmt = c_ast.Compound(barrier_guard.push_guard_below_barriers(
                    items, lambda g=guard: syntax.clone(g), item_dependent=not uniform))
            except barrier_guard.BarrierGuardError as why:
                part = ("does not cover whole work-groups" if not uniform else
                        "runs in only some work-groups")
                raise CodegenError(f"{where}: fragment {k} (launch #{f.launch}) has barriers "
                                   f"and its re-indexing domain {part}, but its guard cannot "
                                   f"be moved below its barriers: {why}") from None
        else:
            block = c_ast.Compound(items)
            stmt = block if guard is None else c_ast.If(guard, block, None)
        kb.comments[id(stmt)] = label
        body.append(stmt)

    return body


def _kernel_text(gc: _GroupCode, extra_comments: Optional[Mapping[int, str]] = None) -> str:
    kb = gc.kb
    comments = dict(kb.comments)
    if extra_comments:
        comments.update(extra_comments)
    printer = _Printer(comments)
    sig = ",\n        ".join(p.decl for p in kb.params) or "void"
    members = ", ".join(f"#{f.launch} {f.kernel}" for f in kb.group.fragments)
    head = (f"/* plan group {kb.group.id} ({kb.group.orchestration}): {members} */\n"
            f"__kernel void {kb.name}({sig})\n")
    return head + printer.visit(gc.func.body)


def _file_scope_text(program: Program) -> str:
    """Typedefs, structs and constant tables of the original kernels' files, which the fused
    kernels use (``particle_t``, ``__constant float coef[]``), as each kernel record holds them."""
    text = emit.declarations_text(d for k in program.kernels.values() for d in k.declarations)
    return text + ("\n" if text else "")


def _helpers_text(groups: list[_GroupCode]) -> str:
    helpers: dict[str, c_ast.FuncDef] = {}
    for gc in groups:
        for name, fd in gc.kb.helpers.items():
            helpers.setdefault(name, fd)
    return emit.helpers_text(helpers)


def source_error(message: str, line: int, kernel_lines: Mapping[int, tuple[int, int]],
                 group_kernels: Mapping[int, str]) -> CodegenError:
    """The error for generated source that does not compile: its line in ``fused.cl`` and the
    plan group whose kernel holds it."""
    grp = [gid for gid, (a, b) in kernel_lines.items() if a <= line <= b]
    owner = f"plan group {grp[0]} (kernel {group_kernels[grp[0]]})" if grp else "helper functions"
    return CodegenError(f"generated kernel does not build: {message} ({owner})", "fused.cl", line)


def generate_fused(plan: FusionPlan, *, target: Optional[Target] = None,
             optimize: bool = True) -> FusedProgram:
    """Fused OpenCL kernels and the fused program for ``plan`` (module docstring).

    A fused work-group that exceeds ``target``'s limits (work-group size, work-item sizes,
    ``__local`` memory) is refused; without a target the limits are not checked.  ``optimize``
    runs the post-fusion optimizations of :mod:`polyfuse.codegen.optimize`.  Building the source
    on a device is the runtime's (:func:`polyfuse.runtime.build.build_fused`).
    """
    from polyfuse.fusion.certify import split_groups
    from polyfuse.uar import instantiate

    program: Program = plan.program
    inst = getattr(plan.uar, "instantiation", None) or instantiate(program)
    models = KernelModels()
    while True:
        made = _generate(plan, inst, target, optimize, models)
        if isinstance(made, _Generated):
            break
        # a multi-launch group code generation cannot produce: its launches run apart
        plan = split_groups(plan, made, Refused.CODEGEN)
    codes, stats, dropped, source, lines, waves, wave_notes, kernels = (
        made.codes, made.stats, made.dropped, made.source, made.lines, made.waves,
        made.wave_notes, made.kernels)
    fused_prog = replace(program, kernels=kernels, ops=_fused_ops(program, codes, waves),
                         name=f"{program.name}_fused")
    groups = []
    after = plan.launches_after
    for gc in codes:
        gid = gc.kb.group.id
        gs = tuple(int(x) if sympy.sympify(x).is_Integer else x for x in gc.global_size)
        notes = tuple(gc.kb.notes) + ((wave_notes[gid],) if gid in wave_notes else ())
        if gid in waves:
            after = _wave_count(after, waves[gid])
        groups.append(FusedKernel(gid, gc.kb.name, gs, gc.local_size, notes))
    return FusedProgram(source=source, program=fused_prog, plan=plan, groups=tuple(groups),
                        launches_after=after, optimizations=stats,
                        dropped_buffers=tuple(sorted(set(dropped))), kernel_lines=lines,
                        wavefronts=waves)


@dataclass
class _Generated:
    """What one code generation attempt made of a plan."""

    codes: list[_GroupCode]
    stats: dict[str, Any]
    dropped: list[str]
    source: str
    lines: dict[int, tuple[int, int]]
    waves: dict[int, Any]
    wave_notes: dict[int, Any]
    kernels: dict[str, Kernel]


def _generate(plan: FusionPlan, inst: Instantiation, target: Optional[Target], optimize: bool,
              models: KernelModels) -> Union[_Generated, dict[int, list[str]]]:
    """The fused kernels of ``plan``; or, where code generation cannot produce some group of
    several launches, those groups and why (a group of one launch that fails is an error)."""
    program: Program = plan.program
    in_groups = _group_of_launch(plan)
    codes: list[_GroupCode] = []
    refused: dict[int, list[str]] = {}
    for g in plan.groups:
        try:
            codes.append(_assemble_group(plan, g, inst, target, f"fused_g{g.id}",
                                         code_motion=optimize, models=models))
        except (PolyfuseError, isl.Error) as err:
            if len(g.members) == 1 and _identity(g.fragments[0].reindex):
                # one launch on its own grid: run as written, or the first refusal stands
                try:
                    codes.append(_assemble_group(plan, g, inst, target, f"fused_g{g.id}",
                                                 code_motion=optimize, models=models,
                                                 original=True))
                except (PolyfuseError, isl.Error):
                    raise err from None
                continue
            if len(g.members) == 1 or plan.uar is None:  # nothing to split, or no UAR to split by
                raise
            refused[g.id] = [err.message if isinstance(err, PolyfuseError) else
                             f"isl: {str(err).splitlines()[0]}"]
    if refused:
        return refused
    stats, dropped = _optimize(codes, program, in_groups, models) if optimize else ({}, [])
    consts = {k: v for gc in codes for k, v in gc.kb.constants.items()}
    stats["constants_propagated"] = len(consts)
    if consts:
        stats.setdefault("details", {})["constants"] = consts
    head, texts, lines = _source(program, codes)
    waves, wave_notes, wave_texts = _wavefronts(plan, codes, texts)
    source = head + "".join(texts) + "".join(wave_texts)
    group_kernels = {gc.kb.group.id: gc.kb.name for gc in codes}
    try:
        # the fused kernels are built as the host built the originals (-cl-fast-relaxed-math...)
        kernels = models.program(head, [(gc.kb.name, t) for gc, t in zip(codes, texts)],
                                 "".join(wave_texts), f"<fused {program.name}>",
                                 shared_runtime_options(program.kernels.values()))
    except PolyfuseError as err:
        if err.line is None:
            raise
        owner = [gid for gid, (a, b) in lines.items() if a <= err.line <= b]
        size = {g.id: len(g.members) for g in plan.groups}
        if owner and size[owner[0]] > 1 and plan.uar is not None:
            return {owner[0]: [f"the fused kernel does not build: {err.message}"]}
        raise source_error(err.message, err.line, lines, group_kernels) from None
    return _Generated(codes, stats, dropped, source, lines, waves, wave_notes, kernels)


def _group_of_launch(plan: FusionPlan) -> dict[int, int]:
    """Launch id -> plan group id; every launch must be in exactly one group."""
    in_groups: dict[int, int] = {}
    for g in plan.groups:
        for f in g.fragments:
            if f.launch in in_groups:
                raise CodegenError(f"plan group {g.id}: launch {f.launch} is already in plan "
                                   f"group {in_groups[f.launch]}")
            in_groups[f.launch] = g.id
    missing = [op.id for op in plan.program.launches if op.id not in in_groups]
    if missing:
        raise CodegenError(f"the plan leaves launches {missing} out of every group")
    return in_groups


def _optimize(codes: list[_GroupCode], program: Program, in_groups: Mapping[int, int],
              models: KernelModels) -> tuple[dict[str, Any], list[str]]:
    """Post-fusion optimizations, each on the fused kernel's own model: what fired (counts and
    details, barriers shared by code motion among them) and the buffers whose stores were
    eliminated."""
    from polyfuse.codegen import optimize as opt

    stats: dict[str, Any] = {}
    dropped: list[str] = []
    helpers_text = _helpers_text(codes)
    for gc in codes:
        res = opt.optimize_group(gc, program, in_groups, helpers_text=helpers_text,
                                 models=models)
        for key, v in res.counts.items():
            stats[key] = stats.get(key, 0) + v
        for key, v in res.details.items():
            stats.setdefault("details", {}).setdefault(key, []).extend(v)
        dropped += res.dropped
    for gc in codes:
        for detail, saved in gc.kb.motion:
            stats["barriers_shared"] = stats.get("barriers_shared", 0) + saved
            stats.setdefault("details", {}).setdefault("barriers_shared", []).append(detail)
    return stats, dropped


def _source(program: Program, codes: list[_GroupCode]
            ) -> tuple[str, list[str], dict[int, tuple[int, int]]]:
    """The fused OpenCL source's head (helper functions) and group kernels, and each group's
    (first, last) line in it."""
    body = _file_scope_text(program) + _helpers_text(codes)
    texts = [_kernel_text(gc) + "\n" for gc in codes]
    head = ("/* generated by polyfuse: fused kernels of program "
            f"{program.name!r} (OpenCL C 1.2) */\n\n" + emit.extension_pragmas([body, *texts])
            + body)
    lines: dict[int, tuple[int, int]] = {}
    line = head.count("\n") + 1
    for gc, text in zip(codes, texts):
        n = text.count("\n")
        lines[gc.kb.group.id] = (line, line + n - 1)
        line += n
    return head, texts, lines


def _wavefronts(plan: FusionPlan, codes: list[_GroupCode], texts: list[str]
                ) -> tuple[dict[int, Any], dict[int, str], list[str]]:
    """Wavefront launch fusion: the groups whose isl-proved wavefront schedule runs one launch
    per step (group id -> wavefront), why each was or was not, and the wave kernels' source."""
    program: Program = plan.program
    waves: dict[int, Any] = {}
    wave_notes: dict[int, KernelNote] = {}
    wave_texts: list[str] = []
    for gc, text in zip(codes, texts):
        g = gc.kb.group
        if not any(isinstance(n, WavefrontSchedule) for n in g.notes):
            continue
        last = program.ops[gc.position]
        step = Launch(id=last.id, kernel=gc.kb.name, work_dim=gc.kb.wd,
                      global_size=tuple(sympy.sympify(x) for x in gc.global_size),
                      local_size=tuple(sympy.Integer(x) for x in gc.local_size),
                      args=tuple(replace(p.binding, index=j) for j, p in enumerate(gc.kb.params)),
                      loops=last.loops, loc=last.loc)
        try:
            wf, wtext = wavefront.plan_wavefront(plan.uar, g, step, text)
        except wavefront.WavefrontError as err:
            wave_notes[g.id] = NoWavefront(str(err))
            continue
        waves[g.id] = wf
        wave_texts.append(wtext)
        wave_notes[g.id] = WavefrontLaunch(wf.slots, wf.outer, wf.inner, wf.kernel)
    return waves, wave_notes, wave_texts


def _fused_ops(program: Program, codes: list[_GroupCode], waves: Mapping[int, Any]
               ) -> tuple[Any, ...]:
    """The host operations of the fused program: one launch per group at its last member's
    position, the other host operations unchanged."""
    by_pos = {gc.position: gc for gc in codes}
    ops: list[Any] = []
    for i, op in enumerate(program.ops):
        if not isinstance(op, Launch):
            ops.append(op)
            continue
        gc = by_pos.get(i)
        if gc is None:
            continue
        kb = gc.kb
        if kb.group.id in waves:
            ops.append(wavefront.wave_launch(waves[kb.group.id]))
            continue
        args = tuple(replace(p.binding, index=j) for j, p in enumerate(kb.params))
        ops.append(Launch(id=op.id, kernel=kb.name, work_dim=kb.wd,
                          global_size=tuple(sympy.sympify(x) for x in gc.global_size),
                          local_size=tuple(sympy.Integer(x) for x in gc.local_size),
                          args=args, loops=op.loops, loc=op.loc))
    return tuple(ops)


def _wave_count(after: Any, wf: Any) -> Any:
    """The plan's launch count with group ``wf`` run per wavefront step: L x T launches of its
    kernel become L + T - 1 (kept as it was when the trip counts are not constants)."""
    other = next(lp for lp in wf.launch.loops if lp.iterator != wf.slot)
    trips = sympy.sympify(other.upper) - sympy.sympify(other.lower)
    if not isinstance(after, int) or not trips.is_Integer:
        return after
    return after - wf.slots * int(trips) + wf.slots + int(trips) - 1


