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
  work-item ids.  A barrier is never put under work-item-dependent control flow: a fragment with
  barriers must have a guard that depends on group ids only, else generation refuses, naming the
  group.  ``barrier_before`` puts a work-group barrier at kernel top level (reached by all).
* **Orchestration.**  ``vertical``/``single``/``hybrid`` run the fragments in sequence in each
  work-item; ``horizontal`` branches on the group id (``if (...) {..} else if (...) {..}``).
  With optimizations on, independent fragments with the same barrier skeleton are merged into
  one body that shares their barriers (code motion, :mod:`polyfuse.codegen.motion`).

The fused NDRange is the bounding box of the re-indexing domains, in whole work-groups, and is
checked against the device's limits.  Post-fusion optimizations are in
:mod:`polyfuse.codegen.optimize`.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import islpy as isl
import sympy
from pycparser import c_ast

from polyfuse.codegen import exprs, wavefront
from polyfuse.frontend import cpp, opencl
from polyfuse.fusion.plan import Fragment, FusedGroup, FusionPlan
from polyfuse.islutil import coalesce
from polyfuse.program import (
    WORK_ITEM_FUNCTIONS,
    ArgBinding,
    Kernel,
    Launch,
    PolyfuseError,
    Program,
    UnsupportedError,
    host_expr_to_isl,
)

_BARRIER_FUNCS = ("barrier", "work_group_barrier")
_FENCE_ALL = "CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE"
_RESERVED = re.compile(r"^(pf_|f\d+_|F_[hgl]\d)")


class CodegenError(PolyfuseError):
    """A plan that cannot be turned into correct OpenCL (names the plan group)."""


@dataclass(frozen=True)
class FusedProgram:
    """The result of :func:`generate` (see the module docstring)."""

    #: OpenCL C 1.2 source of every fused kernel (with helper functions)
    source: str
    #: the fused program: same buffers, host ops, one launch per group
    program: Program
    #: the input plan with global/local size, kernel names and optimizations filled in
    plan: FusionPlan
    #: group id -> fused kernel name
    group_kernels: Mapping[int, str]
    #: root buffers whose intermediate stores were eliminated: their final contents are not
    #: meaningful any more (nothing reads them), so verification must not compare them
    dropped_buffers: tuple[str, ...] = ()
    #: (first line, last line) of each group's kernel in ``source``
    kernel_lines: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    #: group id -> its wavefront (groups run one launch per wavefront step, in ``program``)
    wavefronts: Mapping[int, Any] = field(default_factory=dict)

    @property
    def compared_buffers(self) -> tuple[str, ...]:
        """Root buffers whose final contents must match the unfused program."""
        roots = {self.program.root(n)[0] for n in self.program.buffers}
        return tuple(sorted(roots - set(self.dropped_buffers)))


# ----------------------------------------------------------------------------------------------
# AST utilities
# ----------------------------------------------------------------------------------------------


def _children_slots(node: c_ast.Node) -> Iterator[str]:
    for name in node.__slots__:
        if name not in ("coord", "__weakref__"):
            yield name


def transform(node: Any, fn: Callable[[Any], Any]) -> Any:
    """Post-order rebuild: every child is transformed, then ``fn`` may replace the node."""
    if not isinstance(node, c_ast.Node):
        return node
    for name in _children_slots(node):
        val = getattr(node, name)
        if isinstance(val, c_ast.Node):
            setattr(node, name, transform(val, fn))
        elif isinstance(val, list):
            setattr(node, name, [transform(v, fn) if isinstance(v, c_ast.Node) else v
                                 for v in val])
    return fn(node)


walk = cpp.walk


def _rename(node: Any, mapping: Mapping[str, str]) -> None:
    """Rename identifiers (uses and declarations) consistently; struct fields are left alone."""
    skip: set[int] = set()
    for n in walk(node):
        if isinstance(n, c_ast.StructRef):
            skip.add(id(n.field))
        elif isinstance(n, c_ast.ID) and id(n) not in skip and n.name in mapping:
            n.name = mapping[n.name]
        elif isinstance(n, c_ast.Decl) and n.name in mapping:
            n.name = mapping[n.name]
        elif isinstance(n, c_ast.TypeDecl) and n.declname in mapping:
            n.declname = mapping[n.declname]


def _identifiers(node: Any) -> set[str]:
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, c_ast.ID):
            out.add(n.name)
        elif isinstance(n, c_ast.Decl) and n.name:
            out.add(n.name)
    return out


def _declared(node: Any) -> set[str]:
    return {n.name for n in walk(node) if isinstance(n, c_ast.Decl) and n.name}


def _modified(node: Any, name: str) -> bool:
    """``name`` is assigned, incremented or has its address taken somewhere below ``node``."""
    for n in walk(node):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and \
                n.lvalue.name == name:
            return True
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") and \
                isinstance(n.expr, c_ast.ID) and n.expr.name == name:
            return True
    return False


def _calls(node: Any, names: tuple[str, ...]) -> bool:
    return any(isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID)
               and n.name.name in names for n in walk(node))


def _has_return(node: Any) -> bool:
    return any(isinstance(n, c_ast.Return) for n in walk(node))


def _neg(cond: c_ast.Node) -> c_ast.Node:
    return c_ast.UnaryOp("!", cond)


_items = cpp.block_items


def eliminate_returns(items: list[Any], where: str) -> list[Any]:
    """Statements equivalent to ``items`` without ``return`` (a fragment must fall through).

    ``S; if (c) {A; return;} R`` becomes ``S; if (c) {A} else {R}``; when a branch may fall
    through, the rest ``R`` is moved into both branches (as its own block, so its declarations
    stay scoped).  A ``return`` inside a loop or switch is refused.
    """
    out: list[Any] = []
    for i, s in enumerate(items):
        if not _has_return(s):
            out.append(s)
            continue
        rest = items[i + 1:]
        if isinstance(s, c_ast.Return):
            return out
        if isinstance(s, c_ast.If):
            used_rest = _identifiers(c_ast.Compound(rest)) if rest else set()
            for br in (s.iftrue, s.iffalse):
                clash = {n for n in _top_decls(br)} & used_rest
                if clash:
                    raise UnsupportedError(f"{where}: cannot move the code after a return "
                                           f"under the branch that declares {sorted(clash)[0]}")
            tail = [c_ast.Compound(copy.deepcopy(rest))] if rest else []
            t = eliminate_returns(_items(s.iftrue) + tail, where)
            tail = [c_ast.Compound(copy.deepcopy(rest))] if rest else []
            e = eliminate_returns(_items(s.iffalse) + tail, where)
            if not t and e:
                out.append(c_ast.If(_neg(s.cond), c_ast.Compound(e), None, s.coord))
            elif t or e:
                out.append(c_ast.If(s.cond, c_ast.Compound(t), c_ast.Compound(e) if e else None,
                                    s.coord))
            return out
        if isinstance(s, c_ast.Compound):
            tail = [c_ast.Compound(rest)] if rest else []
            clash = _top_decls(s) & (_identifiers(c_ast.Compound(rest)) if rest else set())
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


class _Printer(cpp.OpenCLGenerator):
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
    notes: list[str] = field(default_factory=list)
    #: fused param name -> (root buffer, byte offset, element type) for buffer params
    buffer_params: dict[str, tuple[str, Any, str]] = field(default_factory=dict)
    #: code motion that fired: (detail, barrier statements saved)
    motion: list[tuple[str, int]] = field(default_factory=list)
    #: ids of the barrier statements fusion put between fragments (``barrier_before``): the only
    #: ones redundant-barrier removal examines
    fusion_barriers: set[int] = field(default_factory=set)

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


def _param_type_text(fd: c_ast.FuncDef, index: int) -> c_ast.Decl:
    return fd.decl.type.args.params[index]


def _orig_local_size(launch: Launch, inst_ls: tuple[int, ...]) -> list[int]:
    if inst_ls and len(inst_ls) == launch.work_dim:
        return [int(x) for x in inst_ls]
    if launch.local_size is not None:
        return [int(sympy.sympify(x)) for x in launch.local_size]
    return [1] * launch.work_dim


def _fragment(kb: _KernelBuilder, k: int, frag: Fragment, fdomain: isl.Set, box: isl.Set,
              inst: Any) -> tuple[list[Any], isl.Set, bool]:
    """The statements of fragment ``k`` (unguarded), its domain, whether it has barriers."""
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
    where = f"{kb.where}, fragment {k} (launch #{launch.id} {kernel.name})"
    fd: c_ast.FuncDef = copy.deepcopy(kernel.ast)
    body = fd.body
    for n in _identifiers(body):
        if _RESERVED.match(n):
            raise UnsupportedError(f"{where}: identifier {n!r} clashes with names polyfuse "
                                   "generates (pf_*, f<k>_*)")

    # helper functions (emitted once before the kernels)
    for name, hfd in opencl._HELPERS.get(kernel.ast, {}).items():
        if hfd is kernel.ast or cpp.is_kernel(hfd):
            continue
        if _calls(hfd.body, WORK_ITEM_FUNCTIONS + _BARRIER_FUNCS):
            if _calls(body, (name,)):
                raise UnsupportedError(f"{where}: helper function {name}() uses work-item "
                                       "functions or barriers; inline it before fusing")
        old = kb.helpers.get(name)
        if old is not None and cpp.generate(old) != cpp.generate(hfd):
            raise UnsupportedError(f"{where}: helper function {name}() differs between fused "
                                   "kernels' files")
        kb.helpers[name] = hfd

    # -- the re-indexing map --------------------------------------------------------------------
    oi = inst.ops[launch.id]
    try:
        rmap = isl.Map(frag.reindex)
    except isl.Error as err:
        raise CodegenError(f"{where}: re-indexing map is not valid isl: {err}") from None
    n_in = rmap.dim(isl.dim_type.in_)
    n_out = rmap.dim(isl.dim_type.out)
    wdo = launch.work_dim
    if n_in != kb.n_h + 2 * kb.wd:
        raise CodegenError(f"{where}: re-indexing map has {n_in} input dims, the fused space "
                           f"has {kb.n_h + 2 * kb.wd}")
    if n_out != len(oi.host_dims) + 2 * wdo:
        raise CodegenError(f"{where}: re-indexing map has {n_out} output dims, launch "
                           f"#{launch.id} has {len(oi.host_dims) + 2 * wdo} (h, g, l)")
    if not rmap.is_single_valued():
        raise CodegenError(f"{where}: re-indexing map is not single-valued")
    if not rmap.is_injective():
        raise CodegenError(f"{where}: re-indexing map is not injective (two fused work-items "
                           "would run the same original one)")
    names = _dim_names(kb.n_h, kb.wd)
    for i, nm in enumerate(names):
        rmap = rmap.set_dim_name(isl.dim_type.in_, i, nm)
    rmap = rmap.set_tuple_name(isl.dim_type.in_, "F")
    orig_dom = oi.domain.reset_tuple_id()
    rng = rmap.range().reset_tuple_id()
    if not rng.is_subset(orig_dom.align_params(rng.get_space())):
        raise CodegenError(f"{where}: re-indexing map reaches work-items outside launch "
                           f"#{launch.id}'s NDRange")
    if not orig_dom.is_subset(rng.align_params(orig_dom.get_space())):
        kb.notes.append(f"fragment {k}: some work-items of launch #{launch.id} are not run "
                        "(outside the re-indexing map's range)")
    dom = rmap.domain()
    if not dom.reset_tuple_id().is_subset(box.reset_tuple_id().align_params(dom.get_space())):
        raise CodegenError(f"{where}: re-indexing domain is not inside the fused NDRange")
    dom_p = exprs.dims_to_params(dom.reset_tuple_id(), n_in, names)
    pma = isl.PwMultiAff.from_map(rmap)
    comps = [exprs.dims_to_params(pma.get_pw_aff(j), n_in, names, isl.dim_type.in_)
             for j in range(n_out)]

    def c_of(pa: isl.PwAff) -> c_ast.Node:
        return exprs.pw_aff_to_c(pa, dom_p, kb.ids)

    ls = _orig_local_size(launch, tuple(oi.local_size))
    gs = [sympy.sympify(x) for x in launch.global_size]
    off = [sympy.sympify(x) for x in (launch.global_offset or (0,) * wdo)]
    nh_o = len(oi.host_dims)

    def host_c(e: Any) -> c_ast.Node:
        e = sympy.sympify(e)
        if e.is_Integer:
            return exprs.int_const(int(e))
        return exprs.pw_aff_to_c(exprs.host_to_pw_aff(e), dom_p, kb.ids)

    def work_item(func: str, d: Optional[int]) -> c_ast.Node:
        if func == "get_work_dim":
            return exprs.cast("uint", exprs.int_const(wdo))
        assert d is not None
        if d >= wdo:
            val = {"get_local_size": 1, "get_num_groups": 1, "get_global_size": 1}.get(func, 0)
            return exprs.cast("size_t", exprs.int_const(val))
        g_pa, l_pa = comps[nh_o + d], comps[nh_o + wdo + d]
        if func == "get_group_id":
            node = c_of(g_pa)
        elif func == "get_local_id":
            node = c_of(l_pa)
        elif func == "get_global_id":
            pa = g_pa.scale_val(isl.Val(ls[d])).add(l_pa) if ls[d] != 1 else g_pa.add(l_pa)
            if off[d] != 0:
                pa = pa.add(exprs.host_to_pw_aff(off[d]).align_params(pa.get_space()))
            node = c_of(pa)
        elif func == "get_local_size":
            node = exprs.int_const(ls[d])
        elif func == "get_global_size":
            node = host_c(gs[d])
        elif func == "get_num_groups":
            node = host_c(sympy.floor(gs[d] / ls[d]) if not (gs[d] / ls[d]).is_Integer
                          else gs[d] / ls[d])
        elif func == "get_global_offset":
            node = host_c(off[d])
        else:  # pragma: no cover - WORK_ITEM_FUNCTIONS is closed
            raise UnsupportedError(f"{where}: {func}() is not supported")
        return exprs.cast("size_t", node)

    # -- parameters ------------------------------------------------------------------------------
    params = fd.decl.type.args.params if fd.decl.type.args else []
    renames: dict[str, str] = {}
    scalar_subst: dict[str, c_ast.Node] = {}
    local_copies: list[Any] = []
    body_decls = _declared(body)
    for p in kernel.params:
        pdecl = params[p.index]
        try:
            b = launch.arg(p.index)
        except KeyError:
            raise CodegenError(f"{where}: argument {p.index} ({p.name}) is not bound") from None
        new = f"f{k}_{p.name}"
        if p.pointer:
            renames[p.name] = new
            d = copy.deepcopy(pdecl)
            _rename(d, {p.name: new})
            kb.params.append(_Param(cpp.generate(d), new, replace(b)))
            if b.kind == "buffer" and b.buffer is not None:
                root, o = _root_offset(program, b.buffer)
                kb.buffer_params[new] = (root, o, p.type)
            elif b.kind == "local" and b.local_bytes is not None:
                lb = sympy.sympify(b.local_bytes)
                kb.local_bytes += int(lb) if lb.is_Integer else 0
            continue
        if b.kind != "scalar":
            raise CodegenError(f"{where}: scalar argument {p.name} is bound to a {b.kind}")
        value = sympy.sympify(b.value) if b.value is not None else sympy.Symbol(p.name)
        if value.is_Number:
            node = literal(value, p.type)
            kb.constants[f"launch {launch.id} {p.name}"] = (
                float(value) if not value.is_Integer else int(value))
        else:
            node = c_ast.ID(kb.symbol_param(value, p.type))
        if _modified(body, p.name) or p.name in body_decls:
            # keep a private copy under the original name (the body assigns it or shadows it)
            d = copy.deepcopy(pdecl)
            d.init = node
            for n in walk(d):
                if isinstance(n, c_ast.TypeDecl):
                    n.quals = [q for q in n.quals if q != "const"] if _modified(
                        body, p.name) else n.quals
            d.quals = [q for q in d.quals if q != "const"] if _modified(body, p.name) \
                else d.quals
            local_copies.append(d)
        else:
            scalar_subst[p.name] = node

    # -- __local arrays: hoist to kernel scope, renamed -----------------------------------------
    local_names: dict[str, str] = {}
    for n in walk(body):
        if isinstance(n, c_ast.Compound) and n.block_items:
            keep = []
            for s in n.block_items:
                if isinstance(s, c_ast.Decl) and cpp.address_space_of(s) == "local":
                    if s.name in local_names:
                        raise UnsupportedError(f"{where}: two __local arrays named {s.name}")
                    local_names[s.name] = f"f{k}_{s.name}"
                    kb.local_decls.append(s)
                else:
                    keep.append(s)
            n.block_items = keep
    for a in kernel.arrays:
        if a.address_space == "local":
            from polyfuse.frontend.opencl import type_size

            kb.local_bytes += (type_size(a.type) or 4) * math.prod(a.shape)
    renames.update(local_names)
    hoisted = kb.local_decls[len(kb.local_decls) - len(local_names):]
    for d in hoisted:
        _rename(d, renames)

    # -- rewrite the body ------------------------------------------------------------------------
    _rename(body, renames)
    struct_fields: set[int] = set()
    for n in walk(body):
        if isinstance(n, c_ast.StructRef):
            struct_fields.add(id(n.field))
        if isinstance(n, c_ast.FuncCall):
            struct_fields.add(id(n.name))

    def sub(n: Any) -> Any:
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and \
                n.name.name in WORK_ITEM_FUNCTIONS:
            args = n.args.exprs if n.args else []
            if n.name.name == "get_work_dim":
                return work_item("get_work_dim", None)
            d = opencl._const_int(args[0]) if args else None
            if d is None:
                raise UnsupportedError(f"{where}: {n.name.name}() with a non-constant "
                                       "dimension cannot be re-indexed")
            return work_item(n.name.name, d)
        if isinstance(n, c_ast.ID) and id(n) not in struct_fields and n.name in scalar_subst:
            return copy.deepcopy(scalar_subst[n.name])
        return n

    body = transform(body, sub)
    items = local_copies + eliminate_returns(list(body.block_items or []), where)
    has_barrier = _calls(c_ast.Compound(items), _BARRIER_FUNCS) or bool(kernel.barriers)
    loc = f" ({launch.loc.file.rsplit('/', 1)[-1]}:{launch.loc.line})" if launch.loc else ""
    kb.comments[id(items[0]) if items else 0] = ""  # placeholder replaced by caller
    if items:
        del kb.comments[id(items[0])]
    kb.notes.append(f"fragment {k}: launch #{launch.id} {kernel.name}{loc}")
    return items, dom, has_barrier


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
        raise CodegenError(f"{kb.where}: the fused NDRange has no {which}imum {what} ({err}); a "
                           "launch size polyfuse cannot bound (e.g. read from a device query) "
                           "must be fixed with --param NAME=VALUE") from None


def _fused_box(kb: _KernelBuilder, doms: list[isl.Set], inst: Any
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
    try:
        rmap = isl.Map(frag.reindex)
    except isl.Error as err:
        raise CodegenError(f"{where}: re-indexing map is not valid isl: {err}") from None
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


def _assemble_group(plan: FusionPlan, group: FusedGroup, inst: Any, limits: Any,
                    name: str, code_motion: bool = False) -> _GroupCode:
    program: Program = plan.program
    where = f"plan group {group.id}"
    if not group.fragments:
        raise CodegenError(f"{where}: no fragments")
    positions = {op.id: i for i, op in enumerate(program.ops)}
    for f in group.fragments:
        if f.launch not in positions:
            raise CodegenError(f"{where}: launch {f.launch} is not in the program")
    last_pos = max(positions[f.launch] for f in group.fragments)
    last = program.ops[last_pos]
    n_h = len(last.loops)
    n_in = isl.Map(group.fragments[0].reindex).dim(isl.dim_type.in_)
    if (n_in - n_h) % 2 or n_in < n_h:
        raise CodegenError(f"{where}: fused space has {n_in} dims, not h({n_h}) + g + l")
    wd = (n_in - n_h) // 2
    if not 1 <= wd <= 3:
        raise CodegenError(f"{where}: fused NDRange has {wd} dimensions (1..3 allowed)")
    if group.orchestration not in ("single", "vertical", "horizontal", "hybrid"):
        raise CodegenError(f"{where}: unknown orchestration {group.orchestration!r}")
    kb = _KernelBuilder(group, plan, name, n_h, wd, tuple(last.loops))
    doms = [_frag_domain(f, n_h, wd, f"{where}, fragment {k + 1}")
            for k, f in enumerate(group.fragments)]
    box, ls, ngroups = _fused_box(kb, doms, inst)

    # device limits (queried, never hard-coded)
    wg = math.prod(ls)
    if limits is not None:
        if wg > limits.max_work_group_size:
            raise CodegenError(f"{where}: fused local size {tuple(ls)} ({wg} work-items) exceeds "
                               f"the device's max work-group size {limits.max_work_group_size}")
        for d, x in enumerate(ls):
            if d < len(limits.max_work_item_sizes) and x > limits.max_work_item_sizes[d]:
                raise CodegenError(f"{where}: local size {x} in dimension {d} exceeds the "
                                   f"device's {limits.max_work_item_sizes[d]}")

    frags = []
    for k, (f, dom) in enumerate(zip(group.fragments, doms), start=1):
        items, _, has_bar = _fragment(kb, k, f, dom, box, inst)
        frags.append((k, f, dom, items, has_bar))
    if limits is not None and kb.local_bytes > limits.local_mem_size:
        raise CodegenError(f"{where}: the fused kernel needs {kb.local_bytes} bytes of __local "
                           f"memory; the device has {limits.local_mem_size}")

    names = _dim_names(n_h, wd)
    box_p = exprs.dims_to_params(box.reset_tuple_id(), n_in, names)

    def comment(k: int, f: Fragment) -> str:
        launch = program.op(f.launch)
        loc = f" ({launch.loc.file.rsplit('/', 1)[-1]}:{launch.loc.line})" if launch.loc else ""
        return f"fragment {k}: launch #{launch.id} {launch.kernel}{loc}"

    body: list[Any] = []
    if group.orchestration == "horizontal":
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
            chain.append((outer, block, comment(k, f)))
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
    else:
        from polyfuse.codegen import motion

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
                kb.notes.append(f"code motion: fragments {text} {shared}")
            else:
                k, f, dom, items, has_bar = (entry.k, entry.frag, entry.dom, entry.items,
                                             entry.has_barrier)
                label = comment(k, f)
            if f.barrier_before and k > 1:
                bar = _barrier_stmt()
                kb.comments[id(bar)] = f"block edge into fragment {k}"
                kb.fusion_barriers.add(id(bar))
                body.append(bar)
            d_p = exprs.dims_to_params(dom.reset_tuple_id(), n_in, names)
            guard = exprs.set_to_c(d_p, box_p, kb.ids)
            block = c_ast.Compound(items)
            if guard is not None and has_bar:
                gpart, uniform = _uniform_part(dom, box, n_h, wd)
                if not uniform:
                    raise CodegenError(
                        f"{where}: fragment {k} (launch #{f.launch}) has barriers but its "
                        "re-indexing domain does not cover whole work-groups: its guard would "
                        "put a barrier under work-item-dependent control flow")
            stmt = block if guard is None else c_ast.If(guard, block, None)
            kb.comments[id(stmt)] = label
            body.append(stmt)

    # kernel scope: hoisted __local arrays first
    items = list(kb.local_decls) + body
    func = c_ast.FuncDef(decl=None, param_decls=None, body=c_ast.Compound(items))
    gsz = tuple(sympy.simplify(ngroups[d] * ls[d]) for d in range(wd))
    return _GroupCode(kb, func, gsz, tuple(ls), last_pos)


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


def _helpers_text(groups: list[_GroupCode]) -> str:
    helpers: dict[str, c_ast.FuncDef] = {}
    for gc in groups:
        for name, fd in gc.kb.helpers.items():
            helpers.setdefault(name, fd)
    if not helpers:
        return ""
    protos = "".join(cpp.generate(fd.decl) + ";\n" for fd in helpers.values())
    return protos + "\n" + "\n".join(cpp.generate(fd) for fd in helpers.values()) + "\n"


def _host_fixed(expr: Any) -> bool:
    return sympy.sympify(expr).is_Number


def generate(plan: FusionPlan, *, device: Any = None, build: bool = True,
             optimize: bool = True) -> FusedProgram:
    """Fused OpenCL kernels and the fused program for ``plan`` (module docstring).

    ``build`` compiles the source on ``device`` (default device) so that a kernel that does not
    build is reported at its line in ``source`` with the plan group that produced it;
    ``optimize`` runs the post-fusion optimizations of :mod:`polyfuse.codegen.optimize`.
    """
    from polyfuse.codegen import optimize as opt
    from polyfuse.runtime.device import device_limits
    from polyfuse.uar import instantiate

    program: Program = plan.program
    inst = getattr(plan.uar, "instantiation", None) or instantiate(program)
    limits = device_limits(device) if device is not False else None
    in_groups: dict[int, int] = {}
    for g in plan.groups:
        for f in g.fragments:
            if f.launch in in_groups:
                raise CodegenError(f"plan group {g.id}: launch {f.launch} is already in plan "
                                   f"group {in_groups[f.launch]}")
            in_groups[f.launch] = g.id
    missing = [op.id for op in program.launches if op.id not in in_groups]
    if missing:
        raise CodegenError(f"the plan leaves launches {missing} out of every group")

    codes: list[_GroupCode] = []
    for g in plan.groups:
        name = f"fused_g{g.id}"
        codes.append(_assemble_group(plan, g, inst, limits, name, code_motion=optimize))

    # post-fusion optimizations (each on the fused kernel's own model)
    stats: dict[str, Any] = {}
    dropped: list[str] = []
    if optimize:
        for gc in codes:
            res = opt.optimize_group(gc, program, in_groups, helpers_text=_helpers_text(codes))
            for key, v in res.counts.items():
                stats[key] = stats.get(key, 0) + v
            for key, v in res.details.items():
                stats.setdefault("details", {}).setdefault(key, []).extend(v)
            dropped += res.dropped
        for gc in codes:
            for detail, saved in gc.kb.motion:
                stats["barriers_shared"] = stats.get("barriers_shared", 0) + saved
                stats.setdefault("details", {}).setdefault("barriers_shared", []).append(detail)
    consts = {k: v for gc in codes for k, v in gc.kb.constants.items()}
    stats["constants_propagated"] = len(consts)
    if consts:
        stats.setdefault("details", {})["constants"] = consts

    # source
    parts = ["/* generated by polyfuse: fused kernels of program "
             f"{program.name!r} (OpenCL C 1.2) */\n\n", _helpers_text(codes)]
    lines: dict[int, tuple[int, int]] = {}
    line = sum(p.count("\n") for p in parts) + 1
    texts = []
    for gc in codes:
        text = _kernel_text(gc) + "\n"
        n = text.count("\n")
        lines[gc.kb.group.id] = (line, line + n - 1)
        line += n
        texts.append(text)
    # wavefront launch fusion: groups whose isl-proved wavefront schedule runs one launch per step
    waves: dict[int, Any] = {}
    wave_notes: dict[int, str] = {}
    for gc, text in zip(codes, texts):
        g = gc.kb.group
        if not any(n.startswith("wavefront schedule") for n in g.notes):
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
            wave_notes[g.id] = f"wavefront launch fusion not applied: {err}"
            continue
        waves[g.id] = wf
        texts.append(wtext)
        wave_notes[g.id] = (f"wavefront launch fusion: one launch of {wf.slots} fragments per "
                            f"step {wf.outer} + {wf.inner} (kernel {wf.kernel})")
    source = "".join(parts) + "".join(texts)
    if build:
        _build_or_explain(source, lines, codes, device)

    filename = f"<fused {program.name}>"
    kernels = opencl.parse_kernels(source, filename)

    # host program: one launch per group at its last member's position
    by_pos = {gc.position: gc for gc in codes}
    ops: list[Any] = []
    new_groups = []
    for i, op in enumerate(program.ops):
        if isinstance(op, Launch):
            gc = by_pos.get(i)
            if gc is None:
                continue
            kb = gc.kb
            if kb.group.id in waves:
                ops.append(wavefront.wave_launch(waves[kb.group.id]))
                continue
            args = tuple(replace(p.binding, index=j) for j, p in enumerate(kb.params))
            last = program.ops[gc.position]
            ops.append(Launch(id=last.id, kernel=kb.name, work_dim=kb.wd,
                              global_size=tuple(sympy.sympify(x) for x in gc.global_size),
                              local_size=tuple(sympy.Integer(x) for x in gc.local_size),
                              args=args, loops=last.loops, loc=last.loc))
        else:
            ops.append(op)
    after = plan.launches_after
    for gc in codes:
        g = gc.kb.group
        gs = tuple(int(x) if sympy.sympify(x).is_Integer else x for x in gc.global_size)
        notes = tuple(g.notes) + tuple(gc.kb.notes)
        if g.id in wave_notes:
            notes += (wave_notes[g.id],)
        if g.id in waves:
            after = _wave_count(after, waves[g.id])
        new_groups.append(replace(g, global_size=gs, local_size=gc.local_size,
                                  kernel=gc.kb.name, notes=notes))
    fused_prog = Program(kernels=kernels, buffers=dict(program.buffers), ops=tuple(ops),
                         params=program.params, context=program.context,
                         name=f"{program.name}_fused", files=program.files,
                         data=program.data)
    new_plan = replace(plan, groups=tuple(new_groups), optimizations=stats,
                       launches_after=after)
    return FusedProgram(source=source, program=fused_prog, plan=new_plan,
                        group_kernels={gc.kb.group.id: gc.kb.name for gc in codes},
                        dropped_buffers=tuple(sorted(set(dropped))), kernel_lines=lines,
                        wavefronts=waves)


def _wave_count(after: Any, wf: Any) -> Any:
    """The plan's launch count with group ``wf`` run per wavefront step: L x T launches of its
    kernel become L + T - 1 (kept as it was when the trip counts are not constants)."""
    other = next(lp for lp in wf.launch.loops if lp.iterator != wf.slot)
    trips = sympy.sympify(other.upper) - sympy.sympify(other.lower)
    if not isinstance(after, int) or not trips.is_Integer:
        return after
    return after - wf.slots * int(trips) + wf.slots + int(trips) - 1


def _build_or_explain(source: str, lines: Mapping[int, tuple[int, int]],
                      codes: list[_GroupCode], device: Any) -> None:
    """Build ``source``; a failure names the line in ``source`` and the plan group."""
    import pyopencl as cl

    from polyfuse.runtime.device import build_log, get_context

    ctx, _queue = get_context(device if device is not False else None)
    prog = cl.Program(ctx, source)
    try:
        prog.build(options=["-cl-std=CL1.2"])
        return
    except cl.Error as err:
        log = build_log(prog, ctx, err)
    # clang prints "FILE:LINE:COL: error: MSG"; PoCL 3.x "error: FILE:LINE:COL: MSG"
    m = re.search(r"^(?:error: )?[^\s:]*:(\d+):\d+: (?:error: )?(.*)$", log, re.M)
    if m:
        ln = int(m.group(1))
        grp = [gid for gid, (a, b) in lines.items() if a <= ln <= b]
        names = {gc.kb.group.id: gc.kb.name for gc in codes}
        owner = f"plan group {grp[0]} (kernel {names[grp[0]]})" if grp else "helper functions"
        raise CodegenError(f"generated kernel does not build: {m.group(2)} ({owner})",
                           "fused.cl", ln)
    raise CodegenError(f"generated kernels do not build: {log.splitlines()[0]}")
