"""Brute-force dependences of a :class:`~polyfuse.core.program.Program` on small concrete sizes.

The oracle the UAR is tested against (docs/ARCHITECTURE.md, "Correctness"): host loops are
unrolled, every launch instance
is *executed* by :mod:`polyfuse.oracle.interp` on seeded random data, and every global-memory
access is recorded per work-item.  Dependences are then computed between op instances in host
order, element by element, and labelled with the width definitions of docs/definitions.md applied
to the
concrete pair sets.

Conventions shared with the UAR (:mod:`polyfuse.uar.effects`):

* a launch instance's work-items are ``(h..., g0.., l0..)`` (``work_dim`` group and local ids); a
  host operation's instance is ``(h...)``;
* elements of a root buffer are counted in a per-root *unit* of bytes: the gcd of the element
  sizes of every kernel parameter bound to it (and of its ``dtype``), so a ``float4`` view
  element ``i`` covers units ``4i..4i+3`` when the buffer is also seen as ``float``; a host
  range touches every unit it overlaps;
* host loops are identified by contiguity: consecutive ops with an equal loop share it;
* a launch without a local size runs with local size 1 (``default_local_size`` changes it).

Dependence semantics (``kill=True``, the default): a read depends (RAW) on the writers of the
element in the *last* earlier op instance that wrote it; a write depends (WAW) on the writers of
the last earlier writing instance and (WAR) on every reader of the element in the instances since
that write (that instance included).  Accesses inside one launch instance are intra-kernel and
never make edges.  ``kill=False`` gives memory-based dependences (every earlier conflicting
instance).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np
from pycparser import c_ast

from polyfuse.c.preprocessor import read_source
from polyfuse.core.program import (
    HostOp,
    Kernel,
    KernelParam,
    Launch,
    PolyfuseError,
    Program,
    eval_host_expr,
    eval_host_int,
    host_instances,
    host_loop_ids,
)
from polyfuse.oracle.interp import (
    CompiledKernel,
    InterpError,
    KernelRun,
    LocalArg,
    PtrT,
    _sizeof,
    compile_kernel,
    numpy_dtype,
    type_by_name,
)

if TYPE_CHECKING:
    from polyfuse.uar import UAR

Pair = tuple[tuple[int, ...], tuple[int, ...]]

# ----------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConcreteEdge:
    """A dependence between two ops, with every concrete work-item pair that carries it.

    Tuples are ``(h..., g..., l...)`` for launches and ``(h...)`` for host operations, exactly the
    UAR's ``L<id>[...]``/``H<id>[...]`` instances.  ``src_dims``/``dst_dims`` give
    ``(host loops, work_dim)`` of each end.
    """

    src: int
    dst: int
    array: str  # the root buffer
    kind: str  # RAW | WAR | WAW
    pairs: frozenset[Pair]
    width: str  # thread | block | global
    loop_carried: bool
    src_kernel: Optional[str]
    dst_kernel: Optional[str]
    src_dims: tuple[int, int]
    dst_dims: tuple[int, int]
    #: the units of ``array`` behind the pairs
    elements: frozenset[int] = field(default=frozenset(), compare=False, repr=False)

    @property
    def host(self) -> bool:
        """True when one end is a host operation."""
        return self.src_kernel is None or self.dst_kernel is None

    @property
    def key(self) -> tuple[int, int, str, str]:
        return (self.src, self.dst, self.array, self.kind)

    def isl_relation(self) -> str:
        """The pair set in isl syntax, ``{ L1[...] -> L2[...]; ... }`` (names as in the UAR)."""
        sn = f"L{self.src}" if self.src_kernel is not None else f"H{self.src}"
        dn = f"L{self.dst}" if self.dst_kernel is not None else f"H{self.dst}"
        body = "; ".join(
            f"{sn}[{', '.join(map(str, a))}] -> {dn}[{', '.join(map(str, b))}]"
            for a, b in sorted(self.pairs)
        )
        return "{ " + body + " }"


@dataclass
class InstanceTrace:
    """One op instance of the simulated host execution (host order = list order)."""

    op_id: int
    h: tuple[int, ...]
    kernel: Optional[str]  # None for host operations
    work_dim: int
    global_size: tuple[int, ...] = ()
    local_size: tuple[int, ...] = ()
    #: raw interpreter trace (launches only): accesses by kernel parameter
    run: Optional[KernelRun] = None
    #: per work-item tuple: the set of ``(root, unit, 'R'|'W')`` accessed
    accesses: dict[tuple[int, ...], set[tuple[str, int, str]]] = field(default_factory=dict)


@dataclass
class Simulation:
    """The host execution: instances in order, final buffer contents, per-root units."""

    instances: list[InstanceTrace]
    buffers: dict[str, np.ndarray]  # root buffer → bytes (uint8)
    units: dict[str, int]
    dtypes: dict[str, np.dtype]

    def array(self, root: str) -> np.ndarray:
        """Final contents of a root buffer, viewed with its element dtype."""
        data = self.buffers[root]
        dt = self.dtypes[root]
        return data[: len(data) // dt.itemsize * dt.itemsize].view(dt)


# ----------------------------------------------------------------------------------------------
# Width on concrete pair sets (docs/definitions.md)
# ----------------------------------------------------------------------------------------------


def is_partial_bijection(pairs: Iterable[tuple[Any, Any]]) -> bool:
    """True iff the relation is single-valued and injective."""
    fwd: dict[Any, Any] = {}
    bwd: dict[Any, Any] = {}
    for a, b in pairs:
        if fwd.setdefault(a, b) != b or bwd.setdefault(b, a) != a:
            return False
    return True


def concrete_width(
    pairs: Iterable[Pair],
    src_block_dims: Optional[int] = None,
    dst_block_dims: Optional[int] = None,
) -> str:
    """``thread``/``block``/``global`` of a concrete work-item relation.

    ``*_block_dims`` is how many leading coordinates identify a work-group (host iterators +
    group ids); the default takes the first half of each tuple (no host loops: ``(g..., l...)``).
    """
    pairs = list(pairs)
    if is_partial_bijection(pairs):
        return "thread"

    def cut(t: tuple, k: Optional[int]) -> tuple:
        return t[: (len(t) // 2 if k is None else k)]

    blocks = {(cut(a, src_block_dims), cut(b, dst_block_dims)) for a, b in pairs}
    if is_partial_bijection(blocks):
        return "block"
    return "global"


# ----------------------------------------------------------------------------------------------
# Host-order simulation
# ----------------------------------------------------------------------------------------------


class _Kernels:
    """Compiled kernels, from the model's ASTs or from caller-supplied sources."""

    def __init__(self, program: Program, sources: Optional[Union[str, Mapping[str, str]]]):
        self.program = program
        self.sources = sources
        self.cache: dict[str, CompiledKernel] = {}
        self.files: dict[str, c_ast.FileAST] = {}

    def get(self, name: str) -> CompiledKernel:
        if name in self.cache:
            return self.cache[name]
        src: Optional[str] = None
        if isinstance(self.sources, str):
            src = self.sources
        elif self.sources is not None:
            src = self.sources.get(name)
        kernel = self.program.kernels.get(name)
        ck: Optional[CompiledKernel] = None
        err: Optional[Exception] = None
        if src is None and kernel is not None and kernel.ast is not None:
            try:
                ck = compile_kernel(kernel.ast, file_ast=_helpers_file(kernel))
            except InterpError as e:  # helper functions or typedefs missing: try the source
                err = e
        if ck is None:
            if src is None and kernel is not None and kernel.loc is not None:
                try:
                    src = read_source(kernel.loc.file)
                except PolyfuseError:
                    src = None
            if src is None and kernel is not None and kernel.source:
                src = kernel.source
            if src is None:
                raise err or PolyfuseError(f"brute force: no source for kernel {name!r}")
            if src not in self.files:
                from polyfuse.oracle.interp import _parse_source

                self.files[src] = _parse_source(src)
            ck = compile_kernel(self.files[src], name)
        self.cache[name] = ck
        return ck


def _helpers_file(kernel: Kernel) -> Optional[c_ast.FileAST]:
    """The kernel with the other functions of its file (:attr:`Kernel.helpers`)."""
    if not kernel.helpers:
        return None
    fd = kernel.ast
    return c_ast.FileAST([f for f in kernel.helpers.values() if f is not fd] + [fd])


def _param_elem(t: Any) -> Any:
    return t.elem if isinstance(t, PtrT) else t


def simulate(
    program: Program,
    params: Optional[Mapping[str, Any]] = None,
    inputs: Optional[Mapping[str, Any]] = None,
    seed: int = 0,
    *,
    sources: Optional[Union[str, Mapping[str, str]]] = None,
    default_local_size: int = 1,
    record_local: bool = False,
) -> Simulation:
    """Run ``program`` in host order on random data; record every access of every instance.

    ``params`` fixes host parameters (and scalar kernel arguments the host does not bind, by the
    kernel parameter's name).  ``inputs`` gives initial contents of root buffers (arrays); other
    buffers get seeded random data: floats in [0, 1), integers in [0, m) where m is the smallest
    element count of any root buffer (valid indices into every buffer).  ``sources`` gives
    OpenCL source text (one text, or per kernel name) when the model's ASTs are not enough.
    """
    params = dict(params or {})
    kernels = _Kernels(program, sources)
    rng = np.random.default_rng(seed)

    # element views of every root: units and dtypes
    views: dict[str, list[Any]] = defaultdict(list)
    for launch in program.launches:
        ck = kernels.get(launch.kernel)
        for idx, (_pname, pt) in enumerate(ck.params):
            if not (isinstance(pt, PtrT) and pt.space in ("global", "constant")):
                continue
            try:
                b = launch.arg(idx)
            except KeyError:
                continue
            if b.kind == "buffer" and b.buffer is not None:
                views[program.root(b.buffer)[0]].append(pt.elem)
    units: dict[str, int] = {}
    dtypes: dict[str, np.dtype] = {}
    for name, buf in program.buffers.items():
        root = program.root(name)[0]
        if buf.dtype and root == name:
            t = type_by_name(buf.dtype.strip())
            if t is not None:
                views[root].insert(0, t)
    roots = sorted({program.root(n)[0] for n in program.buffers})
    for root in roots:
        sizes = [_sizeof(t) for t in views.get(root, [])]
        units[root] = math.gcd(*sizes) if sizes else 1
        first = views[root][0] if views.get(root) else None
        dtypes[root] = numpy_dtype(first) if first is not None else np.dtype(np.float32)

    # storage: bytes per root buffer
    storage: dict[str, np.ndarray] = {}
    for root in roots:
        buf = program.buffers[root]
        data = None if inputs is None else inputs.get(root)
        if buf.size is None and data is None:
            raise PolyfuseError(f"brute force: buffer {root!r} has no size; pass inputs")
        nbytes = eval_host_int(buf.size, params, f"size of {root}") if buf.size is not None else (
            np.asarray(data).nbytes)
        storage[root] = np.zeros(nbytes, dtype=np.uint8)
    counts = [len(storage[r]) // dtypes[r].itemsize for r in roots]
    m = max(1, min([c for c in counts if c > 0], default=1))
    for root in roots:
        dt = dtypes[root]
        raw = storage[root]
        data = None if inputs is None else inputs.get(root)
        n = len(raw) // dt.itemsize
        if data is not None:
            b = np.ascontiguousarray(data).tobytes()
            if len(b) > len(raw):
                raise PolyfuseError(f"brute force: input for {root!r} is larger than the buffer")
            raw[: len(b)] = np.frombuffer(b, dtype=np.uint8)
            continue
        if dt.kind == "f":
            vals = rng.random(n).astype(dt)
        else:
            vals = rng.integers(0, m, size=n).astype(dt)
        raw[: n * dt.itemsize] = vals.view(np.uint8)

    instances: list[InstanceTrace] = []
    for op, h, env in host_instances(program, params):
        if isinstance(op, Launch):
            instances.append(_run_launch(program, op, h, env, kernels, storage, units,
                                         default_local_size, record_local))
        else:
            instances.append(_run_host_op(program, op, h, env, storage, units))
    return Simulation(instances, storage, units, dtypes)


def _byte_view(storage: np.ndarray, start: int, stop: Optional[int], dt: np.dtype) -> np.ndarray:
    seg = storage[start:stop]
    n = len(seg) // dt.itemsize
    return seg[: n * dt.itemsize].view(dt)


def _run_launch(program: Program, launch: Launch, h: tuple, env: dict, kernels: _Kernels,
                storage: dict[str, np.ndarray], units: dict[str, int], default_local: int,
                record_local: bool) -> InstanceTrace:
    ck = kernels.get(launch.kernel)
    wd = launch.work_dim
    tag = f"launch {launch.id} ({launch.kernel})"
    gs = tuple(eval_host_int(x, env, f"{tag} global size") for x in launch.global_size[:wd])
    if launch.local_size is not None:
        ls = tuple(eval_host_int(x, env, f"{tag} local size") for x in launch.local_size[:wd])
    else:
        ls = tuple(default_local if g % default_local == 0 else 1 for g in gs)
    off = None
    if launch.global_offset is not None:
        off = tuple(eval_host_int(x, env, f"{tag} global offset")
                    for x in launch.global_offset[:wd])
    args: dict[str, Any] = {}
    where: dict[str, tuple[str, int, int]] = {}  # param → (root, byte offset, element size)
    for idx, (pname, pt) in enumerate(ck.params):
        try:
            b = launch.arg(idx)
        except KeyError:
            if pname in env:
                args[pname] = env[pname]
                continue
            raise PolyfuseError(
                f"brute force: {tag}: argument {idx} ({pname}) is not set") from None
        if b.kind == "buffer":
            if b.buffer is None:
                raise PolyfuseError(f"brute force: {tag}: argument {pname} has no buffer")
            root, origin = program.root(b.buffer)
            start = eval_host_int(origin, env, f"origin of {b.buffer}")
            size = program.buffers[b.buffer].size
            stop = None if size is None else start + eval_host_int(size, env, f"size of {b.buffer}")
            elem = _param_elem(pt)
            dt = numpy_dtype(elem)
            args[pname] = _byte_view(storage[root], start, stop, dt)
            where[pname] = (root, start, _sizeof(elem))
        elif b.kind == "local":
            if b.local_bytes is None:
                raise PolyfuseError(f"brute force: {tag}: __local argument {pname} has no size")
            args[pname] = LocalArg(eval_host_int(b.local_bytes, env, f"{tag} local bytes"))
        else:
            if b.value is None:
                if pname in env:
                    args[pname] = env[pname]
                    continue
                raise PolyfuseError(f"brute force: {tag}: scalar {pname} unknown; pass it in "
                                    "params")
            args[pname] = eval_host_expr(b.value, env, f"{tag} argument {pname}")
    try:
        run = ck.run(gs, ls, args, off, record_local=record_local)
    except InterpError as err:
        raise InterpError(f"{tag} at h={h}: {err}") from None
    acc: dict[tuple[int, ...], set[tuple[str, int, str]]] = defaultdict(set)
    spans = {p: (root, base, esize, units[root], max(1, esize // units[root]))
             for p, (root, base, esize) in where.items()}
    wis: dict[tuple, tuple[int, ...]] = {}
    for wi0, pname, index, mode in run.raw_accesses:
        root, base, esize, unit, n = spans[pname]
        wi = wis.get(wi0)
        if wi is None:
            wi = wis[wi0] = h + wi0[0] + wi0[1]
        s = acc[wi]
        first = (base + index * esize) // unit
        if n == 1:
            s.add((root, first, mode))
        else:
            for u in range(first, first + n):
                s.add((root, u, mode))
    return InstanceTrace(launch.id, h, launch.kernel, wd, gs, ls, run, dict(acc))


def _run_host_op(program: Program, op: HostOp, h: tuple, env: dict,
                 storage: dict[str, np.ndarray], units: dict[str, int]) -> InstanceTrace:
    acc: set[tuple[str, int, str]] = set()
    spans: dict[str, list[tuple[str, int, int]]] = {"R": [], "W": []}
    for mode, ranges in (("R", op.reads), ("W", op.writes)):
        for rg in ranges:
            root, origin = program.root(rg.buffer)
            base = eval_host_int(origin, env, f"origin of {rg.buffer}")
            start = base + eval_host_int(rg.offset, env, f"host op {op.id} offset")
            if rg.size is not None:
                stop = start + eval_host_int(rg.size, env, f"host op {op.id} size")
            else:
                bsize = program.buffers[rg.buffer].size
                stop = (base + eval_host_int(bsize, env, f"size of {rg.buffer}")
                        if bsize is not None else len(storage[root]))
            unit = units[root]
            for u in range(start // unit, -(-stop // unit)):
                acc.add((root, u, mode))
            spans[mode].append((root, start, stop))
    if op.kind == "copy" and len(spans["R"]) == 1 and len(spans["W"]) == 1:
        (sr, s0, s1), (dr, d0, d1) = spans["R"][0], spans["W"][0]
        n = min(s1 - s0, d1 - d0)
        storage[dr][d0:d0 + n] = storage[sr][s0:s0 + n].copy()
    return InstanceTrace(op.id, h, None, 0, accesses={h: acc} if acc else {})


# ----------------------------------------------------------------------------------------------
# Dependences
# ----------------------------------------------------------------------------------------------


def dependences(sim: Simulation, program: Program, *, kill: bool = True) -> list[ConcreteEdge]:
    """Concrete RAW/WAR/WAW edges between op instances of a simulation (see module doc)."""
    lids = host_loop_ids(program.ops)
    # per cell: last write (instance index, writers) and reads since then
    last_write: dict[tuple[str, int], tuple[int, list]] = {}
    reads_since: dict[tuple[str, int], list[tuple[int, list]]] = defaultdict(list)
    all_writes: dict[tuple[str, int], list[tuple[int, list]]] = defaultdict(list)
    pairs: dict[tuple[int, int, str, str], set[Pair]] = defaultdict(set)
    cells: dict[tuple[int, int, str, str], set[int]] = defaultdict(set)
    insts = sim.instances

    for t, inst in enumerate(insts):
        r_t: dict[tuple[str, int], list] = defaultdict(list)
        w_t: dict[tuple[str, int], list] = defaultdict(list)
        for wi, accs in inst.accesses.items():
            for root, u, mode in accs:
                (r_t if mode == "R" else w_t)[(root, u)].append(wi)

        def add(src_idx: int, kind: str, cell: tuple[str, int], srcs: list, dsts: list,
                dst_op: int = inst.op_id) -> None:
            key = (insts[src_idx].op_id, dst_op, cell[0], kind)
            ps = pairs[key]
            for a in srcs:
                for b in dsts:
                    ps.add((a, b))
            cells[key].add(cell[1])

        for cell, readers in r_t.items():
            if kill:
                lw = last_write.get(cell)
                if lw is not None:
                    add(lw[0], "RAW", cell, lw[1], readers)
            else:
                for idx, ws in all_writes.get(cell, ()):
                    add(idx, "RAW", cell, ws, readers)
        for cell, writers in w_t.items():
            if kill:
                lw = last_write.get(cell)
                if lw is not None:
                    add(lw[0], "WAW", cell, lw[1], writers)
                for idx, rs in reads_since.get(cell, ()):
                    add(idx, "WAR", cell, rs, writers)
            else:
                for idx, ws in all_writes.get(cell, ()):
                    add(idx, "WAW", cell, ws, writers)
                for idx, rs in reads_since.get(cell, ()):
                    add(idx, "WAR", cell, rs, writers)
        # update the state with this instance
        for cell, writers in w_t.items():
            last_write[cell] = (t, writers)
            all_writes[cell].append((t, writers))
            if kill:
                reads_since[cell] = []
        for cell, readers in r_t.items():
            reads_since[cell].append((t, readers))

    ops = {op.id: op for op in program.ops}
    edges = []
    for key in sorted(pairs):
        src, dst, array, kind = key
        ps = pairs[key]
        so, do = ops[src], ops[dst]
        sk = so.kernel if isinstance(so, Launch) else None
        dk = do.kernel if isinstance(do, Launch) else None
        swd = so.work_dim if isinstance(so, Launch) else 0
        dwd = do.work_dim if isinstance(do, Launch) else 0
        snh, dnh = len(so.loops), len(do.loops)
        shared = 0
        for a, b in zip(lids[src], lids[dst]):
            if a != b:
                break
            shared += 1
        carried = any(a[:shared] != b[:shared] for a, b in ps)
        edges.append(ConcreteEdge(
            src=src, dst=dst, array=array, kind=kind, pairs=frozenset(ps),
            width=concrete_width(ps, snh + swd, dnh + dwd), loop_carried=carried,
            src_kernel=sk, dst_kernel=dk, src_dims=(snh, swd), dst_dims=(dnh, dwd),
            elements=frozenset(cells[key]),
        ))
    return edges


def brute_force_dependences(
    program: Program,
    params: Optional[Mapping[str, Any]] = None,
    inputs: Optional[Mapping[str, Any]] = None,
    seed: int = 0,
    *,
    kill: bool = True,
    sources: Optional[Union[str, Mapping[str, str]]] = None,
    default_local_size: int = 1,
) -> list[ConcreteEdge]:
    """Every dependence of ``program`` at concrete sizes, with its work-item pairs and width."""
    sim = simulate(program, params, inputs, seed, sources=sources,
                   default_local_size=default_local_size)
    return dependences(sim, program, kill=kill)


def kernels_from_source(source: str) -> dict[str, Kernel]:
    """Minimal :class:`Kernel` records (parameters + AST, no polyhedral model) for every kernel
    of ``source``: enough for :func:`simulate`, independent of the polyhedral front-end."""
    from polyfuse.oracle.interp import _addr_space, _is_kernel, _parse_source

    file_ast = _parse_source(source)
    out: dict[str, Kernel] = {}
    for ext in file_ast.ext:
        if not (isinstance(ext, c_ast.FuncDef) and _is_kernel(ext)):
            continue
        ck = compile_kernel(file_ast, ext.decl.name)
        params = []
        decls = [p for p in (ext.decl.type.args.params if ext.decl.type.args else [])
                 if getattr(p, "name", None)]
        for i, ((pname, pt), decl) in enumerate(zip(ck.params, decls)):
            is_ptr = isinstance(pt, PtrT)
            el = _param_elem(pt)
            tname = el.name if hasattr(el, "name") else str(el)
            space = (_addr_space(decl) or "private") if is_ptr else "private"
            const = "const" in (getattr(decl, "quals", None) or []) or "const" in (
                getattr(getattr(decl.type, "type", None), "quals", None) or [])
            params.append(KernelParam(pname, i, tname, is_ptr, space, const))
        out[ext.decl.name] = Kernel(name=ext.decl.name, params=tuple(params), statements=(),
                                    source=source, ast=ext)
    return out


def edge_index(edges: Iterable[ConcreteEdge]) -> dict[tuple[int, int, str, str], ConcreteEdge]:
    """Edges by ``(src, dst, array, kind)``."""
    return {e.key: e for e in edges}


def width_mismatches(program: Program, uar: UAR) -> list[str]:
    """Every device edge of ``uar`` that the oracle does not confirm with the same width, one
    line each (empty when the UAR's widths are exact on ``program`` at its concrete sizes)."""
    brute = edge_index(brute_force_dependences(program))
    wrong = []
    for e in uar.edges:
        if e.host:
            continue
        key = (e.src, e.dst, e.array, e.kind)
        if key not in brute:
            wrong.append(f"UAR edge {key} has no concrete dependence")
        elif e.width != brute[key].width:
            wrong.append(f"{key}: UAR {e.width}, oracle {brute[key].width}")
    return wrong


__all__ = [
    "ConcreteEdge",
    "InstanceTrace",
    "Simulation",
    "brute_force_dependences",
    "concrete_width",
    "dependences",
    "edge_index",
    "is_partial_bijection",
    "kernels_from_source",
    "simulate",
    "width_mismatches",
]
