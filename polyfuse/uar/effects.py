"""Instantiation of launches and host operations, and their global-memory effects
(docs/definitions.md).

A launch ``L<id>`` runs the work-items ``L<id>[h..., g0.., l0..]`` (one ``h`` per enclosing host
loop, named after its iterator, one ``g``/``l`` per used NDRange dimension); a host operation runs
at ``H<id>[h...]``.  Effects are isl maps from those instances to the elements of *root* buffers
(sub-buffers resolved), measured in a per-root unit of bytes (the gcd of the element sizes of every
view of the buffer), so a ``float4`` view element ``i`` covers units ``4i..4i+3`` of a buffer also
seen as ``float``.

Kernel parameters are bound to the host expressions the launch passes: an affine one becomes a
constraint (it may involve host-loop iterators), a host parameter stays an isl parameter shared by
all launches.  A value isl cannot express becomes a fresh parameter when it is constant over the
launch's instances (``L<id>_<param>`` for an unknown value, ``_x<k>`` for a non-affine host
expression, see :attr:`Instantiation.fresh_params`), and is left existential otherwise; the latter
over-approximates, so every access of that launch becomes a may-access (no kills).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

import islpy as isl
import sympy
from pycparser import c_ast

from polyfuse.c import syntax, types
from polyfuse.c.preprocessor import address_space_of
from polyfuse.core.islutil import IslQuotaExceeded, bounded, coalesce
from polyfuse.core.program import (
    GLOBAL_OFFSET_PARAMS,
    GLOBAL_SIZE_PARAMS,
    LOCAL_SIZE_PARAMS,
    ArrayDecl,
    HostLoop,
    HostOp,
    Kernel,
    KernelContext,
    Launch,
    PolyfuseError,
    Program,
    Statement,
    UnsupportedError,
    host_expr_to_isl,
    host_loop_ids,
)
from polyfuse.frontend.opencl import specialize_if_needed

LEVELS = ("thread", "block", "kernel")

def type_size(ctype: str, structs: Mapping[str, int]) -> int:
    """Size in bytes of an element type (:func:`polyfuse.c.types.type_size`); an unknown
    one cannot be modelled."""
    size = types.type_size(ctype, structs)
    if size is None:
        raise UnsupportedError(f"unknown element type {ctype!r}: cannot size buffer accesses")
    return size


def _where(op) -> tuple:
    return (op.loc.file, op.loc.line) if op.loc else ()


def _is_int(expr) -> bool:
    return expr is not None and sympy.sympify(expr).is_Integer


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else "b_" + s


# ----------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class OpInstances:
    """The instances of one host operation: isl tuple, host-loop dims, work-item dims, domain."""

    op_id: int
    name: str  # isl tuple name: L<id> or H<id>
    kind: str  # launch | host | sync
    loops: tuple[HostLoop, ...]
    #: identity of each enclosing loop (two ops share a loop iff they share its id)
    loop_ids: tuple[int, ...]
    host_dims: tuple[str, ...]
    work_dim: int
    domain: isl.Set
    #: False when the domain or a binding had to be over-approximated
    exact: bool = True
    local_size: tuple[int, ...] = ()

    @property
    def dims(self) -> tuple[str, ...]:
        wd = range(self.work_dim)
        return self.host_dims + tuple(f"g{d}" for d in wd) + tuple(f"l{d}" for d in wd)

    @property
    def n_group_dims(self) -> int:
        """Dims that identify a work-group (h and g), a prefix of :attr:`dims`."""
        return len(self.host_dims) + self.work_dim


@dataclass(frozen=True, eq=False)
class Effects:
    """Global-memory effects of one operation, per root buffer, at thread level.

    ``must_*`` hold exact accesses, ``may_*`` the over-approximated ones only; the accessors
    :meth:`reads` / :meth:`writes` return their union at a chosen level.
    """

    instances: OpInstances
    must_reads: Mapping[str, isl.Map] = field(default_factory=dict)
    may_reads: Mapping[str, isl.Map] = field(default_factory=dict)
    must_writes: Mapping[str, isl.Map] = field(default_factory=dict)
    may_writes: Mapping[str, isl.Map] = field(default_factory=dict)

    @property
    def buffers(self) -> tuple[str, ...]:
        names = set(self.must_reads) | set(self.may_reads)
        names |= set(self.must_writes) | set(self.may_writes)
        return tuple(sorted(names))

    def access(
        self, direction: str, buffer: str, level: str = "thread", must_only: bool = False
    ) -> Optional[isl.Map]:
        """The ``read``/``write`` relation on one root buffer at ``level`` (None if none)."""
        tables = (self.must_reads, self.may_reads) if direction == "read" else (
            self.must_writes, self.may_writes)
        maps = [t[buffer] for t in (tables[:1] if must_only else tables) if buffer in t]
        if not maps:
            return None
        rel = maps[0]
        for m in maps[1:]:
            rel = rel.union(m)
        return self.project(rel, level)

    def reads(self, level: str = "thread", must_only: bool = False) -> isl.UnionMap:
        """All reads (``must_only``: exact ones) as a union map over root buffers."""
        return self._union("read", level, must_only)

    def writes(self, level: str = "thread", must_only: bool = False) -> isl.UnionMap:
        """All writes (``must_only``: exact ones) as a union map over root buffers."""
        return self._union("write", level, must_only)

    def _union(self, direction: str, level: str, must_only: bool) -> isl.UnionMap:
        result = isl.UnionMap("{ }")
        for b in self.buffers:
            rel = self.access(direction, b, level, must_only)
            if rel is not None:
                result = result.union(isl.UnionMap.from_map(rel))
        return result

    def project(self, rel: isl.Map, level: str) -> isl.Map:
        """Project a thread-level relation to ``block`` (drop l) or ``kernel`` (drop g and l)."""
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
        inst = self.instances
        if level == "thread" or inst.work_dim == 0:
            return rel
        nh, wd = len(inst.host_dims), inst.work_dim
        start, n = (nh + wd, wd) if level == "block" else (nh, 2 * wd)
        return rel.project_out(isl.dim_type.in_, start, n).set_tuple_name(
            isl.dim_type.in_, inst.name)


@dataclass(frozen=True)
class WriteRace:
    """Several work-items of one launch write one element (in one host iteration), with no
    atomic: the original program's result there depends on the order they run, so no run of
    it, fused or not, can be compared with another on that buffer."""

    launch: int
    kernel: str
    #: root buffer
    buffer: str
    #: one element written by several work-items (in units of the root buffer)
    element: int

    def describe(self) -> str:
        return (f"launch {self.launch} ({self.kernel}) writes element {self.element} of "
                f"'{self.buffer}' from several work-items at once")


@dataclass(frozen=True, eq=False)
class Instantiation:
    """Every operation's instances and effects, plus what naming choices were made."""

    program: Program
    ops: Mapping[int, OpInstances]
    effects: Mapping[int, Effects]
    #: root buffer -> bytes per element unit
    units: Mapping[str, int]
    #: root buffer -> isl tuple name of its elements
    buffer_tuples: Mapping[str, str]
    #: fresh isl parameter -> what it stands for
    fresh_params: Mapping[str, str]
    #: isl parameters of the whole analysis
    params: tuple[str, ...]
    context: isl.Set
    notes: tuple[str, ...] = ()
    #: launches whose plain (non-atomic) writes race
    races: tuple[WriteRace, ...] = ()


# ----------------------------------------------------------------------------------------------
# Host expressions
# ----------------------------------------------------------------------------------------------


class _Binder:
    """Turns host expressions into isl text, inventing parameters for what isl cannot express."""

    def __init__(self, program: Program):
        self.params: list[str] = list(program.params)
        self.fresh: dict[str, str] = {}
        self._by_expr: dict[sympy.Expr, str] = {}

    def _use(self, name: str) -> None:
        if name not in self.params:
            self.params.append(name)

    def text(
        self, expr, iterators: Mapping[str, str], unknown_name: str
    ) -> Optional[str]:
        """isl text of ``expr`` over iterator dims and parameters; None: leave it existential.

        ``iterators`` maps host iterator names to the dim names that stand for them.
        """
        varies = bool(iterators)
        if expr is None:
            if varies:
                return None
            self.fresh.setdefault(unknown_name, "unknown host value")
            self._use(unknown_name)
            return unknown_name
        expr = sympy.sympify(expr)
        symbols = {str(s) for s in expr.free_symbols}
        renames = {sympy.Symbol(k): sympy.Symbol(v) for k, v in iterators.items() if k != v}
        try:
            txt = host_expr_to_isl(expr.subs(renames) if renames else expr)
        except ValueError:
            if symbols & set(iterators):
                return None
            name = self._by_expr.get(expr)
            if name is None:
                name = f"_x{len(self._by_expr)}"
                self._by_expr[expr] = name
                self.fresh[name] = str(expr)
            self._use(name)
            return name
        for s in sorted(symbols - set(iterators)):
            self._use(s)
        return txt

    def header(self) -> str:
        return "[" + ", ".join(self.params) + "]"


# ----------------------------------------------------------------------------------------------
# Loops and domains
# ----------------------------------------------------------------------------------------------


def _host_dim_names(loops: tuple[HostLoop, ...]) -> tuple[str, ...]:
    reserved = {f"{p}{d}" for p in "gl" for d in range(3)}
    names: list[str] = []
    for k, loop in enumerate(loops):
        name = _ident(loop.iterator)
        if name in reserved or name in names or name.startswith("_"):
            name = f"h{k}"
        names.append(name)
    return tuple(names)


def _loop_constraints(
    loops: tuple[HostLoop, ...], dims: tuple[str, ...], binder: _Binder
) -> tuple[list[str], bool]:
    """Constraints of the host-loop domain on ``dims``; False if some bound was dropped."""
    cons: list[str] = []
    exact = True
    for k, (loop, dim) in enumerate(zip(loops, dims)):
        outer = {lp.iterator: d for lp, d in zip(loops[:k], dims[:k])}
        lo = binder.text(loop.lower, outer, f"{dim}_lower")
        hi = binder.text(loop.upper, outer, f"{dim}_upper")
        step = loop.step or 1
        if step > 0:
            if lo is not None:
                cons.append(f"{dim} >= {lo}")
            if hi is not None:
                cons.append(f"{dim} < {hi}")
        else:
            if lo is not None:
                cons.append(f"{dim} <= {lo}")
            if hi is not None:
                cons.append(f"{dim} > {hi}")
        if abs(step) != 1:
            if lo is not None:
                cons.append(f"exists (_q : {dim} - ({lo}) = {abs(step)}*_q)")
            else:
                exact = False
        exact = exact and lo is not None and hi is not None
    return cons, exact


# ----------------------------------------------------------------------------------------------
# Kernel-level effects
# ----------------------------------------------------------------------------------------------


def _per_work_item(relation: isl.Map, stmt: Statement, work_dim: int) -> isl.Map:
    """A statement's access as ``K[g0,g1,g2,l0,l1,l2] -> element``: its domain applied, its
    loops projected out, NDRange dims >= ``work_dim`` pinned to 0."""
    rel = relation.intersect_domain(stmt.domain)
    n_in = rel.dim(isl.dim_type.in_)
    if n_in > 6:
        rel = rel.project_out(isl.dim_type.in_, 6, n_in - 6)
    for d in range(work_dim, 3):
        rel = rel.fix_val(isl.dim_type.in_, d, 0).fix_val(isl.dim_type.in_, 3 + d, 0)
    return rel.set_tuple_name(isl.dim_type.in_, "K")


def _kernel_effects(kernel: Kernel, work_dim: int) -> dict[tuple[str, str, bool], isl.Map]:
    """``{K[g0,g1,g2,l0,l1,l2] -> V[i]}`` per (buffer param, direction, exact), loops projected.

    NDRange dims >= ``work_dim`` are pinned to 0 (``get_global_id(d)`` is 0 there).
    """
    buffers = {p.name for p in kernel.params if p.is_buffer}
    out: dict[tuple[str, str, bool], isl.Map] = {}
    for stmt in kernel.statements:
        for acc in stmt.accesses:
            if acc.address_space not in ("global", "constant") or acc.array not in buffers:
                continue
            rel = _per_work_item(acc.relation, stmt, work_dim).set_tuple_name(
                isl.dim_type.out, "V")
            key = (acc.array, acc.direction, bool(acc.exact and stmt.exact_domain))
            out[key] = out[key].union(rel) if key in out else rel
    return {k: coalesce(v) for k, v in out.items()}


def _injective(rel: isl.Map) -> bool:
    """Whether no two work-items may write one element, for every size (an undecided check
    counts as injective: it only decides whether races are looked for per launch)."""
    try:
        with bounded():
            return bool(rel.is_injective())
    except (IslQuotaExceeded, isl.Error):
        return True


def _local_arguments(kernel: Kernel, launch: Launch) -> tuple[ArrayDecl, ...]:
    """The ``__local`` pointer parameters the host sizes with a constant
    (``clSetKernelArg(k, i, bytes, NULL)``), as arrays of that many elements."""
    out = []
    for p in kernel.params:
        if not (p.pointer and p.address_space == "local"):
            continue
        try:
            arg = launch.arg(p.index)
        except KeyError:
            continue
        if arg.kind == "local" and _is_int(arg.local_bytes):
            n = int(arg.local_bytes) // type_size(p.type, kernel.struct_sizes)
            if n > 0:
                out.append(ArrayDecl(p.name, p.type, (n,), "local"))
    return tuple(out)


def _array_accesses(kernel: Kernel, work_dim: int, arguments: tuple[ArrayDecl, ...] = ()
                    ) -> list[tuple[ArrayDecl, str, isl.Map]]:
    """``(array, direction, K[g0,g1,g2,l0,l1,l2] -> A[...])`` of the exact accesses to each
    ``__local`` or private array of constant shape (declared in the kernel, or a ``__local``
    pointer argument in ``arguments``), loops projected (as :func:`_kernel_effects` does for
    buffers)."""
    arrays = {(a.name, a.address_space): a for a in kernel.arrays + arguments
              if a.shape and all(isinstance(n, int) and n > 0 for n in a.shape)}
    out = []
    for stmt in kernel.statements:
        if not stmt.exact_domain:
            continue
        for acc in stmt.accesses:
            array = arrays.get((acc.array, acc.address_space))
            if array is None or not acc.exact or \
                    acc.relation.dim(isl.dim_type.out) != len(array.shape):
                continue
            out.append((array, acc.direction, _per_work_item(acc.relation, stmt, work_dim)
                        .set_tuple_name(isl.dim_type.out, "A")))
    return out


def _local_writes_known(kernel: Kernel, arguments: tuple[ArrayDecl, ...]) -> bool:
    """Whether every write to ``__local`` memory in ``kernel`` is an exact access to a
    constant-shape array (so the elements a work-group writes are known exactly).  A kernel
    that declares a ``__local`` pointer writes through an alias, which is not asked about."""
    if kernel.ast is None or any(isinstance(n, c_ast.Decl) and isinstance(n.type, c_ast.PtrDecl)
                                 and address_space_of(n) == "local"
                                 for n in syntax.walk(kernel.ast.body)):
        return False
    shaped = {a.name for a in kernel.arrays + arguments
              if a.address_space == "local" and a.shape
              and all(isinstance(n, int) and n > 0 for n in a.shape)}
    return all(stmt.exact_domain and acc.exact and acc.array in shaped
               for stmt in kernel.statements for acc in stmt.accesses
               if acc.address_space == "local" and acc.direction == "write")


def _array_box(array: ArrayDecl, header: str) -> isl.Set:
    """The elements of a constant-shape array: ``A[i0, ...] : 0 <= ik < shape[k]``."""
    dims = [f"i{k}" for k in range(len(array.shape))]
    cons = " and ".join(f"0 <= {d} < {n}" for d, n in zip(dims, array.shape))
    return isl.Set(f"{header} -> {{ A[{', '.join(dims)}] : {cons} }}")


def _unit_groups(kernel: Kernel, d: int) -> bool:
    """True when the kernel model pins local id ``d`` to 0 (unit work-groups)."""
    domains = [s.domain for s in kernel.statements] + [b.domain for b in kernel.barriers]
    for dom in domains:
        n = dom.dim(isl.dim_type.set)
        names = ", ".join(f"_d{i}" for i in range(n))
        pin = isl.Set(f"{{ {dom.get_tuple_name()}[{names}] : _d{3 + d} = 0 }}")
        if not dom.is_subset(pin.align_params(dom.get_space())):
            return False
    return True


# ----------------------------------------------------------------------------------------------
# The instantiation
# ----------------------------------------------------------------------------------------------


class _Builder:
    def __init__(self, program: Program):
        self.program = program
        self.binder = _Binder(program)
        self.loop_ids = host_loop_ids(program.ops)
        self.notes: list[str] = []
        self._spec_cache: dict[tuple[str, KernelContext], Kernel] = {}
        # a kernel's effects and the injectivity of its writes are functions of its model
        # (statements and parameters), shared by the renamed copies of one kernel that the
        # identical layers of a model launch: keyed by those records' ids (kept alive by
        # the program)
        self._keff_cache: dict[tuple[int, int, int], dict] = {}
        self._injective_cache: dict[tuple[int, int, int], dict[str, bool]] = {}
        self.races: list[WriteRace] = []
        for op in program.ops:
            names = [a.buffer for a in op.args if a.kind == "buffer"] if isinstance(
                op, Launch) else [r.buffer for r in op.reads + op.writes]
            for name in names:
                if name not in program.buffers:
                    raise PolyfuseError(f"operation {op.id}: unknown buffer {name!r}",
                                        *_where(op))
        self.units = self._units()
        self.tuples: dict[str, str] = {}
        for root in sorted({self.program.root(b)[0] for b in program.buffers}):
            name = _ident(root)
            while name in self.tuples.values() or re.fullmatch(r"[LH]\d+|K|V", name):
                name += "_"
            self.tuples[root] = name

    # -- buffers -------------------------------------------------------------------------------

    def _units(self) -> dict[str, int]:
        sizes: dict[str, list[int]] = {}
        for launch in self.program.launches:
            kernel = self.program.kernels.get(launch.kernel)
            if kernel is None:
                continue
            for arg in launch.args:
                if arg.kind != "buffer" or arg.buffer is None:
                    continue
                try:
                    param = kernel.param(arg.index)
                except KeyError:
                    continue
                if param.is_buffer:
                    root = self.program.root(arg.buffer)[0]
                    sizes.setdefault(root, []).append(type_size(param.type, kernel.struct_sizes))
        units = {}
        for name, buf in self.program.buffers.items():
            root = self.program.root(name)[0]
            if buf.dtype:
                structs = {k: v for kern in self.program.kernels.values()
                           for k, v in kern.struct_sizes.items()}
                sizes.setdefault(root, []).append(type_size(buf.dtype, structs))
        for name in self.program.buffers:
            root = self.program.root(name)[0]
            units[root] = math.gcd(*sizes[root]) if sizes.get(root) else 1
        return units

    def _extent(self, buffer: str, iterators: Mapping[str, str], tag: str) -> tuple:
        """(origin, end) of ``buffer`` in bytes of its root, as isl text (end None: unknown)."""
        root, origin = self.program.root(buffer)
        o = self.binder.text(origin, iterators, f"{tag}_origin")
        size = self.program.buffers[buffer].size
        end = None
        if size is not None:
            end = self.binder.text(sympy.sympify(origin) + size, iterators, f"{tag}_end")
        root_size = self.program.buffers[root].size
        root_end = None if root_size is None else self.binder.text(root_size, {}, f"{tag}_rootsize")
        return root, o, end, root_end

    # -- operations ----------------------------------------------------------------------------

    def op_instances(self, op, host_dims, cons, exact, work_dim, local_size) -> OpInstances:
        name = f"L{op.id}" if isinstance(op, Launch) else f"H{op.id}"
        kind = "launch" if isinstance(op, Launch) else ("sync" if op.kind == "sync" else "host")
        dims = host_dims + tuple(f"g{d}" for d in range(work_dim))
        dims += tuple(f"l{d}" for d in range(work_dim))
        text = f"{self.binder.header()} -> {{ {name}[{', '.join(dims)}] : "
        text += " and ".join(cons) if cons else ""
        text += " }"
        return OpInstances(
            op_id=op.id, name=name, kind=kind, loops=tuple(op.loops),
            loop_ids=self.loop_ids[op.id], host_dims=host_dims, work_dim=work_dim,
            domain=isl.Set(text), exact=exact, local_size=local_size,
        )

    def launch(self, launch: Launch) -> Effects:
        kernel0 = self.program.kernels.get(launch.kernel)
        if kernel0 is None:
            raise UnsupportedError(f"launch {launch.id}: unknown kernel {launch.kernel!r}",
                                   *_where(launch))
        wd = launch.work_dim
        host_dims = _host_dim_names(tuple(launch.loops))
        its = {lp.iterator: d for lp, d in zip(launch.loops, host_dims)}
        cons, exact = _loop_constraints(tuple(launch.loops), host_dims, self.binder)
        tag = f"L{launch.id}"

        # specialize the kernel with what the host fixes (cached per kernel and context)
        def const(x) -> Optional[int]:
            return int(x) if _is_int(x) else None

        offset = tuple(launch.global_offset or ()) + (0,) * (3 - len(launch.global_offset or ()))
        launch_local = [const(launch.local_size[d]) if launch.local_size and d < wd else None
                        for d in range(3)]
        if launch.local_size is None:
            # the implementation chooses the work-groups (the kernel's required size if it
            # has one); groups of one work-item are a choice every implementation may make
            launch_local = [kernel0.context.local_size[d] or 1 if d < wd else None
                            for d in range(3)]
        for what, sizes in (("local", launch_local),
                            ("global", [const(g) for g in launch.global_size[:wd]])):
            for d, v in enumerate(sizes):
                if v is not None and v <= 0:
                    raise PolyfuseError(f"launch {launch.id} of {launch.kernel}: {what} work "
                                        f"size {v} in dimension {d} (at least 1 is needed)",
                                        *_where(launch))
        values = []
        for arg in launch.args:
            if arg.kind == "scalar" and _is_int(arg.value):
                try:
                    values.append((kernel0.param(arg.index).name, int(arg.value)))
                except KeyError:
                    pass
        ctx = KernelContext(
            local_size=tuple(launch_local),
            global_size=tuple(const(launch.global_size[d]) if d < wd else None
                              for d in range(3)),
            values=tuple(sorted(values)),
            global_offset=tuple(const(offset[d]) if d < wd else 0
                                for d in range(3)),
        )
        kernel = self._spec_cache.get((kernel0.name, ctx))
        if kernel is None:
            kernel = specialize_if_needed(kernel0, ctx)
            self._spec_cache[(kernel0.name, ctx)] = kernel
        content = (id(kernel.statements), id(kernel.params), wd)
        keff = self._keff_cache.get(content)
        if keff is None:
            keff = _kernel_effects(kernel, wd)
            self._keff_cache[content] = keff

        # launch geometry: the host's local size, else the kernel's required one, else unit
        # groups when the kernel model does (it cannot observe grouping), else symbolic
        local: list[Optional[int]] = []
        gs_text: list[Optional[str]] = []
        ls_text: list[Optional[str]] = []
        for d in range(3):
            if d >= wd:
                gs_text.append("1")
                ls_text.append("1")
                continue
            gs_text.append(self.binder.text(launch.global_size[d], its, f"{tag}__gs{d}"))
            lval = launch_local[d]
            if lval is None and kernel.context.local_size[d] is not None:
                lval = int(kernel.context.local_size[d])
            if lval is None and _unit_groups(kernel, d):
                lval = 1
            if lval is not None:
                ls_text.append(str(lval))
            else:
                lx = launch.local_size[d] if launch.local_size else None
                ls_text.append(self.binder.text(lx, its, f"{tag}__ls{d}"))
                self.notes.append(f"launch {launch.id}: local size in dimension {d} unknown; "
                                  "work-groups over-approximated")
            local.append(lval)
            cons.append(f"g{d} >= 0 and l{d} >= 0")
            if ls_text[d] is not None:
                cons.append(f"l{d} < {ls_text[d]}")
            if lval is not None and gs_text[d] is not None:
                cons.append(f"{lval}*g{d} + l{d} < {gs_text[d]}")
            else:
                exact = False

        # host values of kernel parameters; turned into isl text only when a relation uses them
        values_of: dict[str, object] = {}
        for p in kernel0.params:
            if not p.pointer:
                try:
                    arg = launch.arg(p.index)
                except KeyError:
                    arg = None
                values_of[p.name] = arg.value if arg is not None and arg.kind == "scalar" else None
        bindings: dict[str, Optional[str]] = {}
        for d in range(3):
            bindings[GLOBAL_SIZE_PARAMS[d]] = gs_text[d]
            bindings[LOCAL_SIZE_PARAMS[d]] = ls_text[d]
            values_of[GLOBAL_OFFSET_PARAMS[d]] = offset[d]

        def bind(name: str) -> Optional[str]:
            if name not in bindings:
                bindings[name] = self.binder.text(values_of.get(name), its,
                                                  f"{tag}_{_ident(name)}")
            return bindings[name]

        keff_injective = self._injective_cache.get(content)
        if keff_injective is None:
            keff_injective = {pname: _injective(rel) for (pname, direction, acc_exact), rel
                              in keff.items() if direction == "write" and acc_exact}
            self._injective_cache[content] = keff_injective
        per_kind: dict[tuple[str, str, bool], isl.Map] = {}
        approx = not exact
        inst = self.op_instances(launch, host_dims, cons, exact, wd,
                                 tuple(x or 0 for x in local))
        domain = inst.domain

        def instantiate(rel: isl.Map, origin: Optional[str] = None) -> tuple[isl.Map, bool]:
            """A kernel-level ``K[g, l] -> X`` relation over this launch's instances, its
            parameters bound to the host's values; and whether a binding was lost."""
            names = [rel.get_dim_name(isl.dim_type.param, j)
                     for j in range(rel.dim(isl.dim_type.param))]
            rel = rel.move_dims(isl.dim_type.in_, 0, isl.dim_type.param, 0, len(names))
            rel = rel.set_tuple_name(isl.dim_type.in_, "K")
            kdims = [f"_k{j}" for j in range(len(names))]
            bcons = []
            lost = False
            for kd, pn in zip(kdims, names):
                txt = origin if pn == "__origin" else bind(pn)
                if txt is None:
                    lost = True
                else:
                    bcons.append(f"{kd} = {txt}")
            wi = [f"g{d}" if d < wd else "0" for d in range(3)]
            wi += [f"l{d}" if d < wd else "0" for d in range(3)]
            wdims = [f"_w{j}" for j in range(6)]
            bcons += [f"{w} = {v}" for w, v in zip(wdims, wi)]
            dims = host_dims + tuple(f"g{d}" for d in range(wd)) + \
                tuple(f"l{d}" for d in range(wd))
            btext = (f"{self.binder.header()} -> {{ {f'L{launch.id}'}[{', '.join(dims)}] -> "
                     f"K[{', '.join(kdims + wdims)}] : {' and '.join(bcons)} }}")
            return isl.Map(btext).apply_range(rel).intersect_domain(domain), lost

        if not approx:
            local_args = _local_arguments(kernel0, launch)
            local_sides: dict[str, dict[str, list[isl.Map]]] = {}
            unbound: set[str] = set()  # local arrays with an access whose binding was lost
            for array, direction, rel in _array_accesses(kernel, wd, local_args):
                res, lost = instantiate(rel)
                if not lost:
                    self._check_in_bounds(launch, kernel0.name, array.name, direction, res,
                                          _array_box(array, self.binder.header()), array)
                if array.address_space == "local":
                    local_sides.setdefault(array.name, {"read": [], "write": []})[direction] \
                        .append(res)
                    if lost:
                        unbound.add(array.name)
            if _local_writes_known(kernel, local_args):
                arrays = {a.name: a for a in kernel.arrays + local_args
                          if a.address_space == "local"}
                for name, sides in sorted(local_sides.items()):
                    if sides["read"] and name not in unbound:
                        self._check_local_written(launch, kernel0.name, arrays[name],
                                                  sides["read"], sides["write"], wd)
        for (pname, direction, acc_exact), rel in sorted(keff.items()):
            try:
                arg = launch.arg(kernel0.param(pname).index)
            except KeyError:
                arg = None
            if arg is None or arg.kind != "buffer" or arg.buffer is None:
                raise UnsupportedError(f"launch {launch.id}: kernel argument {pname!r} of "
                                       f"{kernel0.name} is not bound to a buffer",
                                       *_where(launch))
            root, origin, end, root_end = self._extent(arg.buffer, its, f"{tag}_{pname}")
            unit = self.units[root]
            esize = type_size(kernel0.param(pname).type, kernel0.struct_sizes)
            btuple = self.tuples[root]
            cmap = (f"[__origin] -> {{ V[i] -> {btuple}[e] : __origin + {esize}*i <= {unit}*e "
                    f"<= __origin + {esize}*i + {esize - 1} }}")
            res, lost = instantiate(rel.apply_range(isl.Map(cmap)), origin)
            rng = ["e >= 0"]
            if end is not None:
                rng.append(f"{unit}*e + {unit} <= {end}")
            if root_end is not None:
                rng.append(f"{unit}*e + {unit} <= {root_end}")
            inside = isl.Set(f"{self.binder.header()} -> {{ {btuple}[e] : "
                             f"{' and '.join(rng)} }}")
            must = acc_exact and not lost and not approx
            if must:
                self._check_in_bounds(launch, kernel0.name, pname, direction, res, inside)
            res = res.intersect_range(inside)
            key = (root, direction, must)
            per_kind[key] = per_kind[key].union(res) if key in per_kind else res
            if must and direction == "write" and not keff_injective.get(pname, True):
                self._check_race(launch, kernel0.name, root, res, len(host_dims))
        return self._effects(inst, per_kind)

    def _check_race(self, launch: Launch, kernel: str, root: str, writes: isl.Map,
                    n_host: int) -> None:
        """Record a :class:`WriteRace` when two work-items of one host iteration of ``launch``
        write one element (only asked when the kernel's writes are not injective)."""
        try:
            with bounded():
                same = writes.apply_range(writes.reverse())
                space = same.get_space()
                one_iteration = isl.Map.universe(space)
                for d in range(n_host):
                    one_iteration = one_iteration.equate(isl.dim_type.in_, d,
                                                         isl.dim_type.out, d)
                pairs = same.intersect(isl.Map.lex_lt(space.domain())).intersect(one_iteration)
                if pairs.is_empty():
                    return
                point = writes.intersect_domain(pairs.domain()).range().sample_point()
        except (IslQuotaExceeded, isl.Error):
            self.notes.append(f"launch {launch.id} ({kernel}): whether its writes to {root} "
                              "race was not decided (isl's quota)")
            return
        self.races.append(WriteRace(launch.id, kernel, root,
                                    point.get_coordinate_val(isl.dim_type.set, 0).to_python()))

    def _check_in_bounds(self, launch: Launch, kernel: str, pname: str, direction: str,
                         access: isl.Map, inside: isl.Set,
                         array: Optional[ArrayDecl] = None) -> None:
        """Refuse an exact kernel access that leaves its buffer for every admissible parameter
        value: the original program's behaviour is undefined there, and clipping the access to
        the buffer (as the effects do) would model a program that does not exist.  An access
        that is out of bounds only for some parameter values is left to the program's own
        guards.  A check that exceeds isl's quota is skipped with a note: the effects are
        clipped to the buffer either way, so only the refusal of an undefined program is
        lost."""
        try:
            with bounded():
                # an emptiness test first, in milliseconds: the range of a convolution's
                # access, subtracted, hit the quota (its existential variables); only an access
                # that does leave its buffer pays for it
                if access.intersect_range(inside.complement()).is_empty():
                    return
                outside = access.range().subtract(inside)
                context = isl.Set(self.program.context)
                params = outside.params()
                context = context.align_params(params.get_space())
                params = params.align_params(context.get_space())
                if not context.is_subset(params):
                    return
                witness = outside.sample_point()
        except IslQuotaExceeded:
            self.notes.append(f"launch {launch.id} ({kernel}): the bounds check of {pname} "
                              "exceeded isl's operation quota and was skipped")
            return
        except isl.Error:
            return
        if array is not None:
            elem = [witness.get_coordinate_val(isl.dim_type.set, j).to_python()
                    for j in range(len(array.shape))]
            raise PolyfuseError(f"launch {launch.id} of {kernel}: the kernel "
                                f"{'reads' if direction == 'read' else 'writes'} the "
                                f"{array.address_space} array {array.name}"
                                f"{''.join(f'[{n}]' for n in array.shape)} out of its bounds "
                                f"(e.g. {array.name}{''.join(f'[{e}]' for e in elem)}); the "
                                "original program's behaviour is undefined",
                                *(_where(launch) if array.loc is None else
                                  (array.loc.file, array.loc.line)))
        elem = witness.get_coordinate_val(isl.dim_type.set, 0).to_python()
        buf = launch.arg(self.program.kernels[launch.kernel].param(pname).index).buffer
        raise PolyfuseError(f"launch {launch.id} of {kernel}: the kernel "
                            f"{'reads' if direction == 'read' else 'writes'} {pname} "
                            f"(buffer '{buf}') out of its bounds (e.g. unit {elem} of the "
                            f"buffer); the original program's behaviour is undefined",
                            *_where(launch))

    def _check_local_written(self, launch: Launch, kernel: str, array: ArrayDecl,
                             reads: list[isl.Map], writes: list[isl.Map], wd: int) -> None:
        """Refuse a kernel that reads ``__local`` elements no work-item of its work-group ever
        writes, for every admissible parameter value: local memory starts undefined in each
        work-group, so the original program computes garbage there (a host's 1x1 work-groups
        under a kernel written for 16x16 tiles), and no fused program can be checked against
        it.  Only asked when every write to local memory is an exact access."""
        def per_group(maps: list[isl.Map]) -> isl.Map:
            out = maps[0]
            for m in maps[1:]:
                out = out.union(m)
            return out.project_out(isl.dim_type.in_, out.dim(isl.dim_type.in_) - wd, wd)
        try:
            with bounded():
                written = per_group(writes) if writes else None
                unwritten = per_group(reads)
                if written is not None:
                    unwritten = unwritten.subtract(written)
                if unwritten.is_empty():
                    return
                context = isl.Set(self.program.context)
                params = unwritten.domain().params()
                context = context.align_params(params.get_space())
                params = params.align_params(context.get_space())
                if not context.is_subset(params):
                    return
                witness = unwritten.range().sample_point()
        except IslQuotaExceeded:
            self.notes.append(f"launch {launch.id} ({kernel}): the check that its work-groups "
                              f"write the elements of {array.name} they read exceeded isl's "
                              "operation quota and was skipped")
            return
        except isl.Error:
            return
        elem = "".join(f"[{witness.get_coordinate_val(isl.dim_type.set, j).to_python()}]"
                       for j in range(len(array.shape)))
        local = "x".join(str(n) for n in launch.local_size or ()) or "1"
        raise PolyfuseError(f"launch {launch.id} of {kernel}: the kernel reads elements of the "
                            f"local array {array.name} that no work-item of its work-group "
                            f"writes (e.g. {array.name}{elem}, work-groups of {local}); local "
                            "memory starts undefined, so the original program's behaviour is "
                            "undefined", *_where(launch))

    def host_op(self, op: HostOp) -> Effects:
        host_dims = _host_dim_names(tuple(op.loops))
        its = {lp.iterator: d for lp, d in zip(op.loops, host_dims)}
        cons, exact = _loop_constraints(tuple(op.loops), host_dims, self.binder)
        inst = self.op_instances(op, host_dims, cons, exact, 0, ())
        per_kind: dict[tuple[str, str, bool], isl.Map] = {}
        if op.kind == "sync":
            return self._effects(inst, per_kind)
        tag = f"H{op.id}"
        sides = [("read", r, True) for r in op.reads]
        sides += [("write", r, op.kind != "unknown") for r in op.writes]
        for k, (direction, rng, is_exact) in enumerate(sides):
            root, origin, end, root_end = self._extent(rng.buffer, its, f"{tag}_{k}")
            unit = self.units[root]
            start = self.binder.text(sympy.sympify(self.program.root(rng.buffer)[1]) + rng.offset,
                                     its, f"{tag}_{k}_offset")
            stop = end
            if rng.size is not None:
                stop = self.binder.text(sympy.sympify(self.program.root(rng.buffer)[1])
                                        + rng.offset + rng.size, its, f"{tag}_{k}_stop")
            btuple = self.tuples[root]
            head = f"{self.binder.header()} -> {{ {inst.name}[{', '.join(host_dims)}] -> "
            head += f"{btuple}[e] : e >= 0"
            bounds = [] if root_end is None else [f"{unit}*e + {unit} <= {root_end}"]
            loose = list(bounds)
            tight = list(bounds)
            ok = is_exact and exact
            if start is not None:
                loose.append(f"{unit}*e + {unit} > {start}")
                tight.append(f"{unit}*e >= {start}")
            else:
                ok = False
            if stop is not None:
                loose.append(f"{unit}*e < {stop}")
                tight.append(f"{unit}*e + {unit} <= {stop}")
            else:
                ok = ok and rng.size is None  # to the end of an unsized buffer
            dom = cons
            full = " and ".join([""] + loose + dom)
            loose_map = isl.Map(head + full + " }")
            if ok:
                tight_map = isl.Map(head + " and ".join([""] + tight + dom) + " }")
                parts = [(True, tight_map), (False, loose_map.subtract(tight_map))]
            else:
                parts = [(False, loose_map)]
            for must, rel in parts:
                if rel.is_empty():
                    continue
                key = (root, direction, must)
                per_kind[key] = per_kind[key].union(rel) if key in per_kind else rel
        return self._effects(inst, per_kind)

    @staticmethod
    def _effects(inst: OpInstances, per_kind) -> Effects:
        tables: dict[tuple[str, bool], dict[str, isl.Map]] = {
            (d, m): {} for d in ("read", "write") for m in (True, False)}
        for (root, direction, must), rel in per_kind.items():
            tables[(direction, must)][root] = coalesce(rel)
        return Effects(
            instances=inst,
            must_reads=tables[("read", True)], may_reads=tables[("read", False)],
            must_writes=tables[("write", True)], may_writes=tables[("write", False)],
        )


def instantiate(program: Program) -> Instantiation:
    """Instances and global-memory effects of every operation of ``program``."""
    b = _Builder(program)
    effects: dict[int, Effects] = {}
    for op in program.ops:
        effects[op.id] = b.launch(op) if isinstance(op, Launch) else b.host_op(op)
    params = tuple(b.binder.params)
    space = isl.Set(f"{b.binder.header()} -> {{ : }}").get_space()
    context = isl.Set(program.context).align_params(space)
    # align everything on one parameter space so later unions stay cheap
    aligned = {}
    for op_id, eff in effects.items():
        def al(table: Mapping[str, isl.Map]) -> dict[str, isl.Map]:
            return {k: v.align_params(space) for k, v in table.items()}
        inst = eff.instances
        inst = OpInstances(**{**inst.__dict__, "domain": inst.domain.align_params(space)})
        aligned[op_id] = Effects(inst, al(eff.must_reads), al(eff.may_reads),
                                 al(eff.must_writes), al(eff.may_writes))
    return Instantiation(
        program=program,
        ops={k: v.instances for k, v in aligned.items()},
        effects=aligned,
        units=dict(b.units),
        buffer_tuples=dict(b.tuples),
        fresh_params=dict(b.binder.fresh),
        params=params,
        context=context,
        notes=tuple(dict.fromkeys(b.notes)),
        races=tuple(b.races),
    )
