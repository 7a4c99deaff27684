"""Post-fusion optimizations on a fused kernel, driven by its own polyhedral model.

The passes run on groups of two or more launches (a launch left alone keeps its kernel's code).
Each pass prints the fused kernel, re-extracts it with
:func:`polyfuse.frontend.opencl.parse_kernels` (local size and known global size as context, so
work-item expressions are affine), and maps the
model's statements back onto the kernel being built by walking the printed and the re-parsed
syntax trees in parallel (printing and re-parsing keep the tree shape; if they ever do not, the
pass does nothing, which is always safe).  Kernels that print alike (the groups of identical
layers) share one model, and the isl questions about it are asked once
(:mod:`polyfuse.codegen.models`); the answers do not depend on which buffers a group binds.

* **Private intermediates** (SIRIUS; docs/fusion.md).  A buffer written by exactly one statement
  of the fused kernel, at most once per work-item, with distinct work-items writing distinct
  elements, and read by later statements that (for every instance, for all parameter values) read
  exactly the element the same work-item wrote, is forwarded through a private variable: the
  load becomes the variable.  The global store is dropped only when nothing else reads the
  buffer: no other load in the kernel, no other launch, no host operation.  A kernel whose
  syntax shows no candidate (each buffer stored twice or more, or only in loop bodies, and no
  block as below) is not re-extracted for this pass.
* **Blocks into loops.**  A register-blocked product stores its block in straight-line
  statements (one per accumulator) and its fused epilogue reads it back in loops over the
  block (``for (bi) for (bj)``, :mod:`polyfuse.oplib.blocked`).  The block then goes to a
  private array (``pf_b1[bi][bj]``) the loops read at their own iteration; likewise a buffer
  one loop nest stores and later loops of the same shape read (the epilogue's chain).  The
  loops stay loops (the front-end, UAR and plan see the consumers as written), and isl proves
  it once per statement, not per block position (:func:`_block_proof`); the global store is
  dropped on the same conditions as above.
* **Redundant-barrier removal** (SIRIUS, Algorithm 1).  A barrier is needed only if some
  dependence between two different work-items of one work-group (same ``__local`` array element,
  or same global buffer element, at least one write) has its source before and its sink after
  the barrier in execution order, and no other kept barrier with the right fence lies between
  them.  Barriers are examined one at a time against the barriers still kept, so removing one
  never leaves a dependence unordered.  Barriers that may not be reached uniformly are kept.
* **Block loops fused.**  Last, consecutive fragments that loop over the same block (the
  epilogue's chain after the forwarding above) become one loop nest, each fragment's body in
  its own scope, in order (:mod:`polyfuse.codegen.block_loops`), so each element of the block
  goes through the whole chain in registers.
* **Code motion** so that independent fragments share barriers (as in SIRIUS) is done while the
  fused kernel is assembled, on the fragments themselves (:mod:`polyfuse.codegen.motion`), so
  both passes above see the merged body; it is recorded as ``barriers_shared`` (barrier
  statements no longer emitted) with one detail per merged set of fragments.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import islpy as isl
from pycparser import c_ast

from polyfuse.c import syntax, types
from polyfuse.codegen.block_loops import fuse_block_loops
from polyfuse.codegen.decisions import OptimizationsSkipped
from polyfuse.codegen.models import KernelModels
from polyfuse.core.islutil import IslQuotaExceeded, bounded
from polyfuse.core.program import HostOp, Kernel, KernelContext, Launch, PolyfuseError, Program


@dataclass
class OptResult:
    """What fired on one group: counts for ``optimizations``, details, dropped buffers."""

    counts: dict[str, int] = field(default_factory=dict)
    details: dict[str, list[str]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    #: the private arrays blocks were forwarded into (``pf_b1``...)
    block_arrays: set[str] = field(default_factory=set)

    def add(self, key: str, n: int, detail: Optional[str] = None) -> None:
        self.counts[key] = self.counts.get(key, 0) + n
        if detail:
            self.details.setdefault(key, []).append(detail)


def _model(gc: Any, helpers_text: str, models: KernelModels
           ) -> Optional[tuple[Kernel, dict[int, Any]]]:
    """The fused kernel's model and a map from re-parsed nodes to the nodes being built (the
    model is shared with kernels of the same text, :mod:`polyfuse.codegen.models`)."""
    from polyfuse.codegen.fuse import _kernel_text

    kb = gc.kb
    ls = tuple(gc.local_size) + (None,) * (3 - len(gc.local_size))
    gs = tuple(int(x) if getattr(x, "is_Integer", False) else None for x in gc.global_size)
    gs = gs + (None,) * (3 - len(gs))
    try:
        k = models.model(helpers_text, _kernel_text(gc), kb.name, f"<fused {kb.name}>",
                         KernelContext(local_size=ls, global_size=gs))
    except PolyfuseError as err:
        kb.notes.append(OptimizationsSkipped(str(err)))
        return None
    mine = _shape_walk(gc.func.body)
    theirs = models.answer(("shape", id(k)), lambda: _shape_walk(k.ast.body))
    if len(mine) != len(theirs) or any(type(a) is not type(b) for a, b in zip(mine, theirs)):
        kb.notes.append(OptimizationsSkipped("re-parsed kernel differs in shape"))
        return None
    return k, {id(t): m for t, m in zip(theirs, mine)}


def _shape_walk(node: Any) -> list[Any]:
    """Pre-order nodes, not entering barrier calls (their fence macros print differently)."""
    out: list[Any] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and \
                n.name.name in ("barrier", "work_group_barrier"):
            continue
        stack.extend(reversed([c for _, c in n.children()]))
    return out


#: statements whose children are statements: an assignment directly below one is a statement
#: of its own in the kernel's model
_STATEMENT_PARENTS = (c_ast.Compound, c_ast.If, c_ast.For, c_ast.While, c_ast.DoWhile,
                      c_ast.Label, c_ast.Case, c_ast.Default)


def _may_forward(body: Any, buffers: Mapping[str, tuple[str, Any, str]]) -> bool:
    """Whether ``body`` may hold a store :func:`privatize` forwards, read from its syntax.

    A forwarded store is the only write of its root buffer in the kernel and has no loop
    dimension (the front-end gives every statement of a loop body one), or, for a block, one of
    several stores outside loops whose buffer loop bodies read (a register-blocked product's
    block and the loops of its epilogue), or the one store of its root in loops that other
    loop bodies read (a product whose ragged block is stored by a guarded loop nest,
    :func:`polyfuse.oplib.linalg._blocked_product`, and its epilogue).  A kernel with none,
    whose buffers are each assigned twice or more, or only in loop bodies, or stored in
    straight lines and read only there, is neither printed nor re-extracted for the pass.
    Writes the syntax does not show (``vstore``, helpers) only add writes; an assignment
    inside an expression, which the model may merge with another, answers yes."""
    count: dict[str, int] = {}
    outside: set[str] = set()
    looped_stores: set[str] = set()
    looped_loads: set[str] = set()
    targets: set[int] = set()
    stack: list[tuple[Any, bool, bool]] = [(body, False, True)]
    while stack:
        node, looped, statement = stack.pop()
        if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ArrayRef) \
                and isinstance(node.lvalue.name, c_ast.ID) and node.lvalue.name.name in buffers:
            if not statement:
                return True
            targets.add(id(node.lvalue))
            root = buffers[node.lvalue.name.name][0]
            count[root] = count.get(root, 0) + 1
            (looped_stores if looped else outside).add(root)
        elif looped and isinstance(node, c_ast.ArrayRef) and id(node) not in targets \
                and isinstance(node.name, c_ast.ID) and node.name.name in buffers:
            looped_loads.add(buffers[node.name.name][0])
        loop_body = node.stmt if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)) \
            else None
        parent = isinstance(node, _STATEMENT_PARENTS)
        stack.extend((c, looped or c is loop_body, parent) for c in node)
    return any(count[root] == 1 for root in outside) \
        or bool((outside - looped_stores) & looped_loads) \
        or any(count[root] == 1 for root in (looped_stores - outside) & looped_loads)


def _parents(root: Any) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for n in syntax.walk(root):
        for _, c in n.children():
            out[id(c)] = n
    return out


def _wi_proj(dom: isl.Set) -> isl.Map:
    """Statement instances → their work-item ``[g0, g1, g2, l0, l1, l2]``."""
    n = dom.dim(isl.dim_type.set)
    ident = isl.Map.identity(dom.get_space().map_from_set()).intersect_domain(dom)
    return ident.project_out(isl.dim_type.out, 6, n - 6).reset_tuple_id(isl.dim_type.out)


def _read_elsewhere(program: Program, root: str, group_launches: set[int],
                    models: KernelModels) -> bool:
    """Whether anything outside the group may read ``root`` (other launches, host ops)."""
    by_launch, by_host = models.answer(("readers", id(program)), lambda: _readers(program))
    if root in by_host or any(root in roots for lid, roots in by_launch.items()
                              if lid not in group_launches):
        return True
    buf = program.buffers.get(root)
    if buf is not None and any("HOST_PTR" in f and "COPY" not in f for f in buf.flags):
        return True  # the host sees the memory directly
    return False


def _readers(program: Program) -> tuple[dict[int, set[str]], set[str]]:
    """The root buffers each launch is bound to, and those host operations may read (an
    unknown host operation any buffer it touches)."""
    by_launch: dict[int, set[str]] = {}
    by_host: set[str] = set()
    for op in program.ops:
        if isinstance(op, Launch):
            by_launch.setdefault(op.id, set()).update(
                program.root(a.buffer)[0] for a in op.args if a.kind == "buffer" and a.buffer)
        elif isinstance(op, HostOp):
            touched = op.reads + op.writes if op.kind == "unknown" else op.reads
            by_host.update(program.root(r.buffer)[0] for r in touched)
    return by_launch, by_host


def privatize(gc: Any, program: Program, group_launches: set[int], helpers_text: str,
              res: OptResult, models: Optional[KernelModels] = None) -> None:
    """Forward same-work-item intermediates through private variables (module docstring)."""
    if not _may_forward(gc.func.body, gc.kb.buffer_params):
        return  # no store it could forward: no model of the kernel
    models = models or KernelModels()
    got = _model(gc, helpers_text, models)
    if got is None:
        return
    k, corr = got
    kb = gc.kb
    bp = kb.buffer_params
    writers: dict[str, list[tuple[Any, Any]]] = {}
    readers: dict[str, list[tuple[Any, Any]]] = {}
    for s in k.statements:
        for a in s.accesses:
            if a.address_space not in ("global", "constant"):
                continue
            if a.array not in bp:
                return  # an access polyfuse cannot attribute to a buffer: do nothing
            root = bp[a.array][0]
            (writers if a.direction == "write" else readers).setdefault(root, []).append((s, a))
    parents = _parents(gc.func.body)
    counter = 0
    blocks = _Blocks(gc, program, group_launches, models, res, corr, parents)
    for root, ws in writers.items():
        if len(ws) != 1 or ws[0][0].domain.dim(isl.dim_type.set) != 6:
            blocks.forward(root, ws, readers.get(root, []))
            continue
        s_w, a_w = ws[0]
        views = {(bp[a.array][1], bp[a.array][2]) for _, a in ws + readers.get(root, [])}
        if len(views) != 1 or not a_w.exact or not s_w.exact_domain:
            continue
        node_w = corr.get(id(s_w.node))
        if not (isinstance(node_w, c_ast.Assignment) and isinstance(node_w.lvalue, c_ast.ArrayRef)
                and isinstance(node_w.lvalue.name, c_ast.ID)
                and node_w.lvalue.name.name in bp):
            continue
        if s_w.domain.dim(isl.dim_type.set) != 6:
            continue  # inside a loop: more than one value per work-item
        w_wi = models.answer(("write", id(s_w), id(a_w)), lambda s=s_w, a=a_w: _writer(s, a))
        if w_wi is None:
            continue
        ok_reads = []
        all_ok = True
        for s_r, a_r in readers.get(root, []):
            ok = (a_r.exact and s_r.order > s_w.order and s_r is not s_w
                  and corr.get(id(s_r.node)) is not None)
            if ok:
                ok = models.answer(("read", id(s_w), id(a_w), id(s_r), id(a_r)),
                                   lambda s=s_r, a=a_r, w=w_wi: _reads_own(s, a, w))
            if ok:
                ok_reads.append((s_r, a_r))
            else:
                all_ok = False
        # a statement's loads are replaced together, so every read of B in it must qualify
        ok_ids = {(id(s), id(a)) for s, a in ok_reads}
        bad_stmts = {id(s) for s, a in readers.get(root, []) if (id(s), id(a)) not in ok_ids}
        ok_reads = [(s, a) for s, a in ok_reads if id(s) not in bad_stmts]
        if not ok_reads:
            continue
        # rewrite: declare the private value, capture it at the store, replace the loads
        counter += 1
        var = f"pf_v{counter}"
        ctype = bp[node_w.lvalue.name.name][2]
        # zero-initialized although every read is proved to follow its work-item's store: PoCL 3.1
        # (Debian's, LLVM 15) gave all work-items but the first a wrong value for a private left
        # undefined on the paths where its store is guarded off (the block arrays too)
        zero = c_ast.Constant("int", "0") if types.scalar(ctype) or types.vector(ctype) else None
        decl = c_ast.Decl(var, [], [], [], [], c_ast.TypeDecl(var, [], None,
                                                               c_ast.IdentifierType([ctype])),
                          zero, None)
        replaced = 0
        params_b = {p for p, v in bp.items() if v[0] == root}
        done: set[int] = set()
        for s_r, _a in ok_reads:
            node_r = corr[id(s_r.node)]
            if id(node_r) in done:
                continue
            done.add(id(node_r))
            replaced += _replace_loads(node_r, params_b, var)
        if not replaced:
            continue
        gc.func.body.block_items.insert(len(kb.local_decls) + counter - 1, decl)
        dead = (all_ok and node_w.op == "="
                and not _read_elsewhere(program, root, group_launches, models)
                and not _remaining_refs(gc.func.body, params_b, [node_w]))
        parent = parents.get(id(node_w))
        new: c_ast.Node
        if dead:
            new = c_ast.Assignment("=", c_ast.ID(var), node_w.rvalue)
            res.add("stores_eliminated", 1, f"group {kb.group.id}: {root}")
            res.dropped.append(root)
        else:
            new = c_ast.Assignment("=", c_ast.ID(var), node_w)
        _replace_child(parent, node_w, new)
        res.add("loads_privatized", replaced,
                f"group {kb.group.id}: {root} ({replaced} load(s) -> {var})")


#: most elements of a block forwarded through a private array (one array per work-item; a
#: register-blocked product's block is at most 4 x 32)
MAX_BLOCK = 256


@dataclass
class _Blocks:
    """Forwarding of a block into loops (module docstring) in one fused kernel: its context,
    and the private arrays declared so far."""

    gc: Any
    program: Program
    group_launches: set[int]
    models: KernelModels
    res: OptResult
    corr: Mapping[int, Any]
    parents: Mapping[int, Any]
    count: int = 0

    def forward(self, root: str, ws: list[tuple[Any, Any]], rs: list[tuple[Any, Any]]) -> None:
        """Forward ``root``'s block (its stores ``ws``) into the loops reading it (``rs``
        among its reads), when :func:`_block_proof` proves it."""
        bp = self.gc.kb.buffer_params
        stores = [self.corr.get(id(s.node)) for s, _ in ws]
        if len({id(s) for s, _ in ws}) != len(ws) or not all(
                a.exact and s.exact_domain and _is_store(n, bp) for (s, a), n in zip(ws, stores)):
            return
        if len({(bp[a.array][1], bp[a.array][2]) for _, a in ws + rs}) != 1:
            return
        w_ranks = {s.domain.dim(isl.dim_type.set) - 6 for s, _ in ws}
        r_ranks = {s.domain.dim(isl.dim_type.set) - 6 for s, _ in rs}
        if len(r_ranks) != 1 or 0 in r_ranks or not (w_ranks == {0} or w_ranks == r_ranks
                                                       and len(ws) == 1):
            return  # straight-line stores, or one store in loops like the reads'
        last = max(s.order for s, _ in ws)
        loops = {id(s): self._iterators(s) for s, _ in ws + rs}
        cand = [(s, a) for s, a in rs if a.exact and s.exact_domain and s.order > last
                and loops[id(s)] and self.corr.get(id(s.node)) is not None]
        if len(cand) != len(rs) or any(w_ranks != {0} and not loops[id(s)] for s, _ in ws):
            return  # a read this cannot forward: the stores stay, and so do the loads
        key = ("block",) + tuple((id(s), id(a)) for s, a in ws + rs)
        proof = self.models.answer(key, lambda: _block_proof(ws, rs))
        if proof is None:
            return
        slots, extents = proof
        self.count += 1
        name = f"pf_b{self.count}"
        self.res.block_arrays.add(name)
        params_b = {p for p, v in bp.items() if v[0] == root}

        def at(index: Sequence[Union[str, int]]) -> c_ast.ArrayRef:
            ref: Any = c_ast.ID(name)
            for i in index:
                ref = c_ast.ArrayRef(ref, c_ast.ID(i) if isinstance(i, str)
                                     else c_ast.Constant("int", str(i)))
            return ref

        replaced = 0
        for s, _a in rs:
            replaced += _replace_loads(self.corr[id(s.node)], params_b,
                                       lambda s=s: at(loops[id(s)]))
        dead = (all(n.op == "=" for n in stores)
                and not _remaining_refs(self.gc.func.body, params_b, stores)
                and not _read_elsewhere(self.program, root, self.group_launches, self.models))
        for (s, _a), node, slot in zip(ws, stores, slots):
            target = at(slot if slot is not None else loops[id(s)])
            _replace_child(self.parents.get(id(node)), node,
                           c_ast.Assignment("=", target, node.rvalue if dead else node))
        ctype: Any = c_ast.TypeDecl(name, [], None, c_ast.IdentifierType(
            [bp[stores[0].lvalue.name.name][2]]))
        for e in reversed(extents):
            ctype = c_ast.ArrayDecl(ctype, c_ast.Constant("int", str(e)), [])
        body = self.gc.func.body.block_items
        zero = c_ast.InitList([c_ast.Constant("int", "0")])  # as a private value is, in privatize
        body.insert(len(self.gc.kb.local_decls), c_ast.Decl(name, [], [], [], [], ctype, zero,
                                                            None))
        shape = "][".join(map(str, extents))
        if dead:
            self.res.add("stores_eliminated", 1, f"group {self.gc.kb.group.id}: {root} "
                         f"({len(stores)} store(s) into {name}[{shape}])")
            self.res.dropped.append(root)
        self.res.add("loads_privatized", replaced, f"group {self.gc.kb.group.id}: {root} "
                     f"({replaced} load(s) in loops -> {name}[{shape}])")

    def _iterators(self, s: Any) -> list[str]:
        """The iterators of the loops around ``s``'s statement, outermost first, when they
        are the loop dimensions of its domain (by name) and no declaration in the loops
        shadows them; else none."""
        node = self.corr.get(id(s.node))
        names: list[str] = []
        outer = None
        while node is not None:
            parent = self.parents.get(id(node))
            if isinstance(parent, (c_ast.While, c_ast.DoWhile)):
                return []
            if isinstance(parent, c_ast.For) and node is parent.stmt:
                init = parent.init
                if not (isinstance(init, c_ast.DeclList) and len(init.decls) == 1):
                    return []
                names.append(init.decls[0].name)
                outer = parent
            node = parent
        names.reverse()
        dims = [s.domain.get_dim_name(isl.dim_type.set, 6 + i)
                for i in range(s.domain.dim(isl.dim_type.set) - 6)]
        decls = [n for n in _walk_all(outer) if isinstance(n, c_ast.Decl)] if outer else []
        if names != dims or sum(n.name in names for n in decls) > len(names):
            return []
        return names


def _is_store(node: Any, bp: Mapping[str, tuple[str, Any, str]]) -> bool:
    """Whether ``node`` is a statement assigning one element of a buffer parameter."""
    return (isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ArrayRef)
            and isinstance(node.lvalue.name, c_ast.ID) and node.lvalue.name.name in bp)


def _block_proof(ws: list[tuple[Any, Any]], rs: list[tuple[Any, Any]]
                 ) -> Optional[tuple[list[Optional[tuple[int, ...]]], tuple[int, ...]]]:
    """Where each store of ``ws`` puts its value in a private array so that every read of
    ``rs`` (statements in loops) finds, at its own loop iteration, what its work-item stored
    there; and the array's extents.  None unless it holds exactly.

    A slot is a loop iteration of the reads.  The first read statement's
    ``R = {[work-item, iteration] -> element}`` must be a function and injective, and each
    other read statement's a subset of it (they read what it reads).  One store in loops (the
    reads' rank) stores at its own iteration: its ``{[work-item, iteration] -> element}`` must
    include ``R`` and be injective.  Straight-line stores (:func:`_store_slots`) must together
    equal ``R``, each at its own iteration.  Either way every element read was written once,
    by the same work-item at the same slot, and nothing else writes it; the checks are one map
    comparison per statement, on maps of one piece each, never a union over the block."""
    def rel(s: Any, a: Any) -> isl.Map:
        return a.relation.set_tuple_name(isl.dim_type.out, _ELEM).reset_tuple_id(
            isl.dim_type.in_)

    read = rel(*rs[0])
    if not (read.is_single_valued() and read.is_injective()):
        return None
    if not all(rel(s, a).is_subset(read.align_params(rel(s, a).get_space())) for s, a in rs[1:]):
        return None
    slots: list[Optional[tuple[int, ...]]]
    if ws[0][0].domain.dim(isl.dim_type.set) > 6:
        w_map = rel(*ws[0])
        if not (w_map.is_injective() and read.is_subset(w_map.align_params(read.get_space()))):
            return None
        box = w_map.domain().project_out(isl.dim_type.set, 0, 6)
        slots = [None]
    else:
        box = read.domain().project_out(isl.dim_type.set, 0, 6)
        got = _store_slots(ws, read, box)
        if got is None:
            return None
        slots = list(got)
    extents = []
    for d in range(box.dim(isl.dim_type.set)):
        lo, hi = box.dim_min_val(d), box.dim_max_val(d)
        if not (lo.is_int() and hi.is_int()) or lo.to_python() < 0:
            return None
        extents.append(hi.to_python() + 1)
    if math.prod(extents) > MAX_BLOCK:
        return None
    return slots, tuple(extents)


def _store_slots(ws: list[tuple[Any, Any]], read: isl.Map, box: isl.Set
                 ) -> Optional[list[tuple[int, ...]]]:
    """Each straight-line store's slot, such that the stores equal ``read``
    (``{[work-item, iteration] -> element}``, iterations ``box``): store ``w`` writes, for
    every work-item, what ``read`` reads at its slot (``{work-item -> element}`` equal), and the
    slots are distinct and cover ``box``.  The n-th store is tried at the n-th iteration first
    (a product stores its block in the order its epilogue's loops read it); otherwise its slot
    is the iteration at which its element is read.  None when no such slots exist."""
    count = box.count_val()
    if not count.is_int() or count.to_python() != len(ws) or len(ws) > MAX_BLOCK:
        return None
    points: list[tuple[int, ...]] = []
    rank = box.dim(isl.dim_type.set)
    box.foreach_point(lambda p: points.append(tuple(
        p.get_coordinate_val(isl.dim_type.set, d).to_python() for d in range(rank))))
    points.sort()
    inverse: Optional[isl.Map] = None
    slots: list[tuple[int, ...]] = []
    for w, (s, a) in enumerate(ws):
        stored = _wi_proj(s.domain).reverse().apply_range(
            a.relation.set_tuple_name(isl.dim_type.out, _ELEM)).reset_tuple_id(isl.dim_type.in_)
        slot: Optional[tuple[int, ...]] = points[w]
        if not _reads_at(read, points[w], stored):
            if inverse is None:  # [work-item, element] -> [work-item, iteration] reading it
                inverse = _with_wi(read).reverse()
            at = _with_wi(stored).apply_range(inverse.align_params(stored.get_space())).range()
            at = at.project_out(isl.dim_type.set, 0, 6)
            slot = None
            if at.is_singleton() and not at.is_empty():
                p = at.sample_point()
                slot = tuple(p.get_coordinate_val(isl.dim_type.set, d).to_python()
                             for d in range(rank))
            if slot is None or not _reads_at(read, slot, stored):
                return None
        slots.append(slot)
    return slots if sorted(slots) == points else None


def _with_wi(m: isl.Map) -> isl.Map:
    """``{[work-item, ...] -> element}`` as ``{[work-item, ...] -> [work-item, element]}``."""
    wi = isl.Map.identity(m.get_space().domain().map_from_set()).project_out(
        isl.dim_type.out, 6, m.dim(isl.dim_type.in_) - 6)
    return wi.flat_range_product(m)


def _reads_at(read: isl.Map, slot: tuple[int, ...], stored: isl.Map) -> bool:
    """Whether ``read`` at iteration ``slot`` reads, for every work-item, the element
    ``stored`` (``{work-item -> element}``) writes, on the same work-items."""
    at = read
    for d, v in enumerate(slot):
        at = at.fix_val(isl.dim_type.in_, 6 + d, v)
    at = at.project_out(isl.dim_type.in_, 6, len(slot))
    return bool(at.is_equal(stored.align_params(at.get_space())))


#: the tuple name the checks below give every root buffer's elements (the answers do not depend
#: on it, so groups of identical layers, which use different buffers, share them)
_ELEM = "pf_elem"


def _writer(s_w: Any, a_w: Any) -> Optional[isl.Map]:
    """Work-item -> the element statement ``s_w`` writes with ``a_w``, when every work-item
    writes one element and distinct work-items distinct ones (else None)."""
    w_wi = _wi_proj(s_w.domain).reverse().apply_range(
        a_w.relation.set_tuple_name(isl.dim_type.out, _ELEM))
    return w_wi if w_wi.is_single_valued() and w_wi.is_injective() else None


def _reads_own(s_r: Any, a_r: Any, w_wi: isl.Map) -> bool:
    """Whether every instance of ``s_r`` reads with ``a_r`` exactly the element its work-item
    wrote (``w_wi`` from :func:`_writer`)."""
    via = _wi_proj(s_r.domain).apply_range(w_wi)
    rel_r = a_r.relation.set_tuple_name(isl.dim_type.out, _ELEM)
    return bool(rel_r.is_subset(via.align_params(rel_r.get_space())))


def _replace_loads(node: Any, params: set[str], var: Union[str, Callable[[], Any]]) -> int:
    """Replace the loads of ``params`` in ``node`` by the private variable ``var`` (or a fresh
    expression from it); how many were replaced (none when ``node`` writes them)."""
    count = 0

    def fn(n: Any) -> Any:
        nonlocal count
        if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and \
                n.name.name in params:
            count += 1
            return c_ast.ID(var) if isinstance(var, str) else var()
        return n

    # never replace an assignment's target or an address-of operand
    for n in _walk_all(node):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ArrayRef) and \
                isinstance(n.lvalue.name, c_ast.ID) and n.lvalue.name.name in params:
            return 0
        if isinstance(n, c_ast.UnaryOp) and n.op == "&":
            return 0
    syntax.transform(node, fn)
    return count


def _walk_all(node: Any) -> list[Any]:
    return list(syntax.walk(node))


def _remaining_refs(body: Any, params: set[str], stores: list[Any]) -> bool:
    """Any reference to ``params`` left outside the stores' own targets."""
    skip = {id(n) for store in stores for n in _walk_all(store.lvalue)}
    for n in _walk_all(body):
        if isinstance(n, c_ast.ID) and n.name in params and id(n) not in skip:
            return True
    return False


def _replace_child(parent: Any, old: Any, new: Any) -> None:
    for name in syntax.child_slots(parent):
        val = getattr(parent, name)
        if val is old:
            setattr(parent, name, new)
            return
        if isinstance(val, list):
            for i, v in enumerate(val):
                if v is old:
                    val[i] = new
                    return
    raise AssertionError("node not found under its parent")


# ----------------------------------------------------------------------------------------------
# Barriers
# ----------------------------------------------------------------------------------------------


def _lex_lt(xs: list[str], ys: list[str]) -> str:
    terms = []
    for i in range(len(xs)):
        eq = [f"{xs[j]} = {ys[j]}" for j in range(i)]
        terms.append("(" + " and ".join(eq + [f"{xs[i]} < {ys[i]}"]) + ")")
    return " or ".join(terms) or "false"


def _sched_map(k: Kernel, sid: str) -> Optional[isl.Map]:
    found: list[isl.Map] = []
    if k.schedule is None:
        return None
    k.schedule.foreach_map(lambda m: found.append(m) if m.get_tuple_name(
        isl.dim_type.in_) == sid else None)
    return found[0] if found else None


def _fusion_barriers(k: Kernel, corr: dict[int, Any], gc: Any) -> list[Any]:
    """The model's barriers that fusion put between fragments (``barrier_before``)."""
    by_loc = {}
    for n in syntax.walk(k.ast.body):
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and \
                n.name.name in ("barrier", "work_group_barrier") and n.coord is not None:
            by_loc[(n.coord.line, n.coord.column)] = n
    out = []
    for b in k.barriers:
        parsed = by_loc.get((b.loc.line, b.loc.column)) if b.loc is not None else None
        mine = corr.get(id(parsed)) if parsed is not None else None
        if mine is not None and id(mine) in gc.kb.fusion_barriers:
            out.append((b, mine))
    return out


def _accesses(k: Kernel, bp: Mapping[str, Any]
              ) -> Optional[tuple[dict[tuple[str, str], list[tuple[bool, isl.Map]]], int]]:
    """Per (memory kind, array): (is write, ``[g, l, time] -> element``) of every access."""
    roots_views: dict[str, set] = {}
    for s in k.statements:
        for a in s.accesses:
            if a.address_space in ("global", "constant"):
                if a.array not in bp:
                    return None
                roots_views.setdefault(bp[a.array][0], set()).add(bp[a.array][1:])
    acc: dict[tuple[str, str], list[tuple[bool, isl.Map]]] = {}
    n_t = None
    for s in k.statements:
        sched = _sched_map(k, s.id)
        if sched is None:
            return None
        n_t = sched.dim(isl.dim_type.out)
        comb = _wi_proj(s.domain).flat_range_product(sched.reset_tuple_id(isl.dim_type.out))
        for a in s.accesses:
            if a.address_space == "private":
                continue
            kind = "local" if a.address_space == "local" else "global"
            rel = a.relation
            key = f"loc_{a.array}" if kind == "local" else bp[a.array][0]
            if kind == "global" and len(roots_views[key]) > 1:
                rel = rel.project_out(isl.dim_type.out, 0, rel.dim(isl.dim_type.out))
            rel = rel.set_tuple_name(isl.dim_type.out, key)
            t = comb.reverse().apply_range(rel.align_params(comb.get_space()))
            acc.setdefault((kind, key), []).append(
                (a.direction == "write", t.reset_tuple_id(isl.dim_type.in_)))
    return (acc, n_t) if n_t is not None else None


def remove_barriers(gc: Any, helpers_text: str, res: OptResult,
                    models: Optional[KernelModels] = None) -> None:
    """Seed 001 Algorithm 1 (module docstring), on the barriers fusion introduced.

    The kernels' own barriers were placed by their authors (a library GEMM's tiles, a tree
    reduction's levels) and are left alone.  Each fusion barrier is checked on its own, access
    pair by access pair, and is kept at the first pair of work-items it orders; an isl quota
    hit keeps it too.
    """
    if not gc.kb.fusion_barriers:
        return
    models = models or KernelModels()
    got = _model(gc, helpers_text, models)
    if got is None:
        return
    k, corr = got
    if not k.barriers or k.schedule is None:
        return
    candidates = _fusion_barriers(k, corr, gc)
    got_acc = _accesses(k, gc.kb.buffer_params) if candidates else None
    if got_acc is None:
        return
    acc, n_t = got_acc
    a_dims = ["g0", "g1", "g2", "l0", "l1", "l2"] + [f"t{i}" for i in range(n_t)]
    b_dims = ["g0", "g1", "g2", "m0", "m1", "m2"] + [f"u{i}" for i in range(n_t)]
    tb = [f"b{i}" for i in range(n_t)]
    other_item = isl.Map(
        f"{{ [{', '.join(a_dims)}] -> [{', '.join(b_dims)}] : "
        f"(l0 != m0 or l1 != m1 or l2 != m2) }}")
    lex_u = isl.Map(f"{{ [{', '.join(a_dims)}] -> [g0, g1, g2, {', '.join(tb)}] : "
                    f"{_lex_lt(a_dims[6:], tb)} }}")
    lex_v = isl.Map(f"{{ [g0, g1, g2, {', '.join(tb)}] -> [{', '.join(b_dims)}] : "
                    f"{_lex_lt(tb, b_dims[6:])} }}")

    def crossing(b: Any) -> Optional[isl.Map]:
        sched = _sched_map(k, b.id)
        if sched is None or not b.uniform:
            return None
        bt = _wi_proj(b.domain).flat_range_product(sched.reset_tuple_id(isl.dim_type.out))
        bt = bt.range().project_out(isl.dim_type.set, 3, 3)
        u = lex_u.align_params(bt.get_space()).intersect_range(
            bt.align_params(lex_u.get_space()).reset_tuple_id())
        x = u.apply_range(lex_v.align_params(u.get_space()))
        return x.intersect(other_item.align_params(x.get_space()))

    kept = {b.id for b in k.barriers}
    parents = _parents(gc.func.body)
    removed = 0
    for b, mine in candidates:
        try:
            with bounded():
                needed = _barrier_needed(k, b, kept, acc, crossing)
        except IslQuotaExceeded:
            needed = True
        parent = parents.get(id(mine))
        if needed or not isinstance(parent, c_ast.Compound):
            continue
        parent.block_items = [s for s in parent.block_items if s is not mine]
        kept.discard(b.id)
        removed += 1
    if removed:
        res.add("barriers_removed", removed, f"group {gc.kb.group.id}: {removed} barrier(s)")


def _barrier_needed(k: Kernel, b: Any, kept: set[str],
                    acc: dict[tuple[str, str], list[tuple[bool, isl.Map]]],
                    crossing: Any) -> bool:
    """Whether two work-items of a group access one element across ``b`` (one writing) with
    no other kept barrier of that fence between them; stops at the first such pair."""
    x = crossing(b)
    if x is None or b.loc is None:
        return True
    others: dict[str, list[isl.Map]] = {}
    for (kind, _key), maps in acc.items():
        if kind not in b.fences:
            continue
        for i, (w1, m1) in enumerate(maps):
            for w2, m2 in maps[i:]:
                if not (w1 or w2):
                    continue
                for src, dst in ((m1, m2), (m2, m1)):
                    src_x = x.intersect_domain(src.domain().align_params(x.get_space()))
                    if src_x.is_empty():
                        continue
                    live = src_x.intersect(src.apply_range(dst.reverse()).align_params(
                        src_x.get_space()))
                    if live.is_empty():
                        continue
                    if kind not in others:
                        others[kind] = [c for o in k.barriers
                                        if o.id != b.id and o.id in kept and kind in o.fences
                                        for c in [crossing(o)] if c is not None]
                    for xo in others[kind]:
                        live = live.subtract(xo.align_params(live.get_space()))
                        if live.is_empty():
                            break
                    if not live.is_empty():
                        return True
    return False


def optimize_group(gc: Any, program: Program, in_groups: Mapping[int, int],
                   helpers_text: str = "", models: Optional[KernelModels] = None) -> OptResult:
    """Run the post-fusion optimizations on one group's kernel (in place on ``gc``);
    ``models`` shares fused kernels' models across the groups of one program."""
    res = OptResult()
    models = models or KernelModels()
    members = {f.launch for f in gc.kb.group.fragments}
    if len(members) > 1:  # a launch left alone keeps its kernel's code as its author wrote it
        privatize(gc, program, members, helpers_text, res, models)
        remove_barriers(gc, helpers_text, res, models)
        roots = {p: v[0] for p, v in gc.kb.buffer_params.items()}
        for note in fuse_block_loops(gc.func.body, roots, res.block_arrays, gc.kb.comments):
            res.add("block_loops_fused", 1, f"group {gc.kb.group.id}: {note}")
    return res
