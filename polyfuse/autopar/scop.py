"""Static control parts (SCoPs) of plain C functions and their polyhedral model.

Sources are read with :func:`polyfuse.c.preprocessor.parse` (``gcc -E`` with polyfuse's headers and
the user's ``-I``/``-D``, ``opencl=False``).  On that path the preprocessor keeps ``#pragma`` lines
and pycparser turns them into :class:`~pycparser.c_ast.Pragma` nodes *in place* among the block
items, so ``#pragma scop`` / ``#pragma endscop`` are found directly in the syntax tree (no
line-number mapping is needed).  Functions with such pragmas use exactly those regions; other
functions get maximal runs of consecutive qualifying statements (at any block depth) that contain
at least one loop.

Integer expressions (bounds, conditions, subscripts) become isl ``PwAff``s through the
expression model the OpenCL front-end uses too (:class:`polyfuse.frontend.affine.AffineExtractor`:
C truncating division via ``tdiv_q``, ``min``/``max``, ternaries, single-return helpers).

Model conventions: statement ``S<n>`` runs at ``S<n>[i0, ..., id-1]`` (enclosing loop iterators,
outermost first, named by their C names); its original schedule is the 2d+1 textual schedule
padded to the region's deepest nest.  Arrays are accessed with one isl dimension per C dimension
(``A[i][j]`` → ``A[i, j]``), never linearized, so no size parameter enters the dependence test.
Scalars declared outside the region are 0-d arrays; scalars declared inside a loop body are
private to one iteration of their enclosing loops and are modelled expanded over them
(``tmp@3[i, j]``), so they create no loop-carried dependence.  Distinct arrays are assumed not to
alias (as PPCG and Polly without run-time checks assume).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

import islpy as isl
from pycparser import c_ast

from polyfuse.c import preprocessor, printer, syntax
from polyfuse.frontend.affine import AffineExtractor, NonAffine, State, Var

#: calls allowed inside a SCoP: C99 <math.h> functions without side effects
PURE_MATH = frozenset(
    "sqrt sqrtf exp expf exp2 log logf log2 log10 pow powf sin sinf cos cosf tan tanf asin acos "
    "atan atan2 sinh cosh tanh fabs fabsf floor floorf ceil ceilf fmin fmax fminf fmaxf fmod "
    "cbrt hypot erf erfc round trunc copysign".split())
_INT_NAMES = {"int", "long", "short", "char", "unsigned", "signed", "size_t", "ptrdiff_t",
              "int32_t", "int64_t", "uint32_t", "uint64_t", "_Bool", "bool"}
_FLOAT_NAMES = {"float", "double"}


class NotScop(Exception):
    """A construct that ends a SCoP: ``reason`` names it, ``line`` says where."""

    def __init__(self, reason: str, line: Optional[int]):
        super().__init__(f"line {line}: {reason}" if line else reason)
        self.reason = reason
        self.line = line


# ----------------------------------------------------------------------------------------------
# Symbols
# ----------------------------------------------------------------------------------------------


@dataclass
class Symbol:
    """A C variable visible in the function: scalar (int/float) or array."""

    name: str
    kind: str  # "int" | "float" | "array" | "other"
    ctype: str  # scalar type or array element type
    extents: tuple[Any, ...] = ()  # array: AST node per dimension (None: unknown first extent)
    scope: str = "local"  # "param" | "local" | "global"
    decl: Any = None


def _base_type(t: Any) -> tuple[str, list[Any], bool]:
    """(type name, array extents outermost first, is pointer) of a declarator."""
    extents: list[Any] = []
    ptr = False
    while not isinstance(t, c_ast.TypeDecl):
        if isinstance(t, c_ast.ArrayDecl):
            extents.append(t.dim)
        elif isinstance(t, c_ast.PtrDecl):
            if ptr or extents:
                return "", [], True
            ptr = True
        else:
            return "", [], ptr
        t = t.type
    inner = t.type
    name = " ".join(inner.names) if isinstance(inner, c_ast.IdentifierType) else ""
    return name, extents, ptr


def symbol_of(decl: c_ast.Decl, scope: str) -> Symbol:
    """Classify a declaration (why: the SCoP test needs to know ints from floats from arrays)."""
    name, extents, ptr = _base_type(decl.type)
    words = set(name.split())
    scalar_kind = "int" if words & _INT_NAMES and not words & _FLOAT_NAMES else (
        "float" if words & _FLOAT_NAMES else "other")
    if ptr and not extents:
        return Symbol(decl.name, "array" if scalar_kind != "other" else "other", name, (None,),
                      scope, decl)
    if extents:
        return Symbol(decl.name, "array" if scalar_kind != "other" else "other", name,
                      tuple(extents), scope, decl)
    return Symbol(decl.name, scalar_kind, name, (), scope, decl)


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------


@dataclass
class Access:
    array: str
    write: bool
    relation: isl.Map


@dataclass(eq=False)
class Stmt:
    """A leaf statement with its iteration domain and accesses."""

    id: str
    node: Any
    domain: isl.Set
    accesses: list[Access]
    loops: list[Loop]
    position: list[int]  # textual position at each depth (2d+1 constants)
    line: int
    reduction: Optional[tuple[str, str]] = None  # (array, operator) of `x op= e` statements

    @property
    def depth(self) -> int:
        return len(self.loops)


@dataclass(eq=False)
class Loop:
    """A counted ``for`` loop: iterator, step, its own domain and its children (in order)."""

    id: str
    node: c_ast.For
    iterator: str
    step: int
    domain: isl.Set  # over enclosing iterators and this one
    depth: int  # number of enclosing loops
    parent: Optional[Loop]
    children: list[Item] = field(default_factory=list)
    line: int = 0


@dataclass(eq=False)
class Block:
    """A non-loop child of a loop or region: a statement, an ``if`` or a braced block."""

    node: Any
    stmts: list[Stmt]
    loops: list[Loop]  # loops nested inside (under an if)
    line: int = 0


Item = Union[Loop, Block]


@dataclass
class Region:
    """One SCoP: its items, statements, loops and arrays, or why it was not modelled."""

    index: int
    function: str
    items: list[Any]  # the C statements (AST nodes) of the region
    first_line: int
    last_line: int
    pragma: bool
    params: list[str] = field(default_factory=list)
    stmts: list[Stmt] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    tree: list[Item] = field(default_factory=list)
    arrays: dict[str, Symbol] = field(default_factory=dict)  # arrays accessed (not privates)
    scalars_read: dict[str, Symbol] = field(default_factory=dict)  # outer scalars read
    scalars_written: dict[str, Symbol] = field(default_factory=dict)  # outer scalars written
    privates: dict[str, str] = field(default_factory=dict)  # private scalar → C type
    iterators: dict[str, str] = field(default_factory=dict)  # loop iterator → C type
    schedule: Optional[isl.UnionMap] = None
    reads: Optional[isl.UnionMap] = None
    writes: Optional[isl.UnionMap] = None
    error: Optional[NotScop] = None
    func_node: Any = None
    #: the Compound whose block items the region is a slice of, and the slice
    parent_block: Any = None
    span: tuple[int, int] = (0, 0)

    @property
    def modelled(self) -> bool:
        return self.error is None

    def space(self, depth: int) -> isl.Space:
        return isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=[f"c{k}" for k in range(depth)],
                                           params=self.params)


def _line(node: Any) -> int:
    c = getattr(node, "coord", None)
    return int(c.line) if c is not None and c.line else 0


# ----------------------------------------------------------------------------------------------
# Building a region's model
# ----------------------------------------------------------------------------------------------


class _Builder:
    """Walks a region's statements, checking SCoP rules and building domains and accesses."""

    def __init__(self, region: Region, symbols: dict[str, Symbol]):
        self.r = region
        self.sym = symbols
        self.nstmt = 0
        self.nloop = 0
        self.max_depth = 0
        self.declared_inside: dict[str, tuple[str, int]] = {}  # private scalar → (type, depth)

    def fail(self, reason: str, node: Any) -> NotScop:
        return NotScop(reason, _line(node))

    # -- pre-pass: parameters -------------------------------------------------------------------

    def collect_params(self) -> None:
        written: set[str] = set()
        iters: set[str] = set()
        declared: set[str] = set()
        used: set[str] = set()
        for item in self.r.items:
            written |= syntax.modified(item)
            for n in syntax.walk(item):
                if isinstance(n, c_ast.For):
                    it = syntax.loop_shape(n)[0]
                    if it:
                        iters.add(it)
                elif isinstance(n, c_ast.Decl):
                    declared.add(n.name)
                elif isinstance(n, c_ast.ID):
                    used.add(n.name)
        params = []
        for name in sorted(used - iters - declared - written):
            s = self.sym.get(name)
            if s is not None and s.kind == "int":
                params.append(name)
        self.r.params = params
        self.aff = AffineExtractor(params)

    # -- expressions ------------------------------------------------------------------------------

    def state(self, loops: list[Loop], dom: isl.Set, env: dict[str, Var]) -> State:
        return State([lp.iterator for lp in loops], dom, env)

    def int_value(self, node: Any, st: State) -> isl.PwAff:
        try:
            return self.aff.aff(node, st)
        except NonAffine as e:
            raise self.fail(f"non-affine expression {printer.opencl_source(node)} ({e.reason})",
                            node) from None

    def condition(self, node: Any, st: State) -> isl.Set:
        try:
            return self.aff.cond(node, st)
        except NonAffine as e:
            raise self.fail(f"non-affine condition {printer.opencl_source(node)} ({e.reason})",
                            node) from None

    def element_map(self, name: str, idx: list[isl.PwAff], dom: isl.Set) -> isl.Map:
        if idx:
            m = isl.Map.from_pw_aff(idx[0])
            for k in idx[1:]:
                m = m.flat_range_product(isl.Map.from_pw_aff(k))
        else:
            pl = ", ".join(self.r.params)
            m = isl.Map.from_domain_and_range(dom, isl.Set(f"[{pl}] -> {{ [] }}"))
        m = m.intersect_domain(dom)
        return m.set_tuple_name(isl.dim_type.out, name)

    def expr_accesses(self, node: Any, st: State, env: dict[str, Var], out: list[Access],
                      write: bool = False) -> None:
        """Reads (and the write, for an lvalue) of an expression; rejects what is not SCoP."""
        if node is None:
            return
        if isinstance(node, c_ast.Constant):
            return
        if isinstance(node, c_ast.ID):
            self.scalar_access(node, st, env, out, write)
            return
        if isinstance(node, c_ast.ArrayRef):
            base, subs = syntax.flatten_ref(node)
            if not isinstance(base, c_ast.ID):
                raise self.fail(f"array access through {printer.opencl_source(base)}", node)
            s = self.sym.get(base.name)
            if s is None or s.kind != "array":
                raise self.fail(f"{base.name} is not an array of int/float elements", node)
            if len(subs) != len(s.extents):
                raise self.fail(f"{printer.opencl_source(node)} does not select one element of "
                                f"{base.name} ({len(s.extents)} dimensions)", node)
            idx = [self.int_value(x, st) for x in subs]
            for x in subs:
                self.expr_accesses(x, st, env, out)
            self.r.arrays[base.name] = s
            out.append(Access(base.name, write, self.element_map(base.name, idx, st.dom)))
            return
        if isinstance(node, c_ast.BinaryOp):
            if node.op in ("&&", "||"):
                raise self.fail(f"short-circuit operator {node.op} (conditional evaluation)",
                                node)
            self.expr_accesses(node.left, st, env, out)
            self.expr_accesses(node.right, st, env, out)
            return
        if isinstance(node, c_ast.UnaryOp):
            if node.op in ("&", "*", "sizeof") or node.op in ("++", "--", "p++", "p--"):
                if node.op == "sizeof":
                    return
                raise self.fail(f"operator {node.op.strip('p')} inside an expression", node)
            self.expr_accesses(node.expr, st, env, out)
            return
        if isinstance(node, c_ast.Cast):
            if isinstance(node.to_type.type, c_ast.PtrDecl):
                raise self.fail("pointer cast", node)
            self.expr_accesses(node.expr, st, env, out)
            return
        if isinstance(node, c_ast.TernaryOp):
            for x in (node.cond, node.iftrue, node.iffalse):
                self.expr_accesses(x, st, env, out)
            return
        if isinstance(node, c_ast.FuncCall):
            fname = node.name.name if isinstance(node.name, c_ast.ID) else "?"
            if fname not in PURE_MATH:
                raise self.fail(f"call to {fname}() (only side-effect-free math functions are "
                                f"allowed)", node)
            for a in (node.args.exprs if node.args else []):
                self.expr_accesses(a, st, env, out)
            return
        if isinstance(node, c_ast.StructRef):
            raise self.fail(f"structure access {printer.opencl_source(node)}", node)
        raise self.fail(f"unsupported expression {type(node).__name__}", node)

    def scalar_access(self, node: c_ast.ID, st: State, env: dict[str, Var], out: list[Access],
                      write: bool) -> None:
        name = node.name
        var = env.get(name)
        if var is not None and var.kind == "int" and (var.dim is not None
                                                      or var.value is not None):
            if write:
                raise self.fail(f"assignment to loop iterator or index variable {name}", node)
            return
        if name in self.declared_inside:
            ctype, depth = self.declared_inside[name]
            idx = [self.aff.dim(st, k) for k in range(depth)]
            out.append(Access(f"{name}@{depth}", write, self.element_map(f"{name}@{depth}", idx,
                                                                          st.dom)))
            return
        s = self.sym.get(name)
        if s is None:
            if name in ("true", "false") or name in PURE_MATH:
                return
            raise self.fail(f"unknown identifier {name}", node)
        if s.kind == "array":
            raise self.fail(f"array {name} used as a value (pointer)", node)
        if s.kind == "other":
            raise self.fail(f"variable {name} of type {s.ctype or 'pointer/struct'}", node)
        if s.kind == "int" and name in self.r.params:
            if write:
                raise self.fail(f"assignment to parameter {name}", node)
            return
        (self.r.scalars_written if write else self.r.scalars_read)[name] = s
        out.append(Access(name, write, self.element_map(name, [], st.dom)))

    # -- statements -------------------------------------------------------------------------------

    def items(self, nodes: list[Any], loops: list[Loop], dom: isl.Set, env: dict[str, Var],
              position: list[int], out: list[Item]) -> None:
        for node in nodes:
            pos = position + [len(out)]
            self.item(node, loops, dom, env, pos, out)

    def item(self, node: Any, loops: list[Loop], dom: isl.Set, env: dict[str, Var],
             position: list[int], out: list[Item]) -> None:
        depth = len(loops)
        if isinstance(node, c_ast.For):
            out.append(self.loop(node, loops, dom, env, position))
            return
        blk = Block(node, [], [], _line(node))
        before_s, before_l = len(self.r.stmts), len(self.r.loops)
        self.inner(node, loops, dom, env, position)
        blk.stmts = self.r.stmts[before_s:]
        blk.loops = self.r.loops[before_l:]
        if blk.stmts or blk.loops or not isinstance(node, c_ast.Decl):
            out.append(blk)
        del depth

    def inner(self, node: Any, loops: list[Loop], dom: isl.Set, env: dict[str, Var],
              position: list[int]) -> None:
        """A statement below a Block: if, compound, expression, declaration."""
        if isinstance(node, c_ast.Compound):
            sub: list[Item] = []
            for k, x in enumerate(node.block_items or []):
                self.item(x, loops, dom, env, position + [k], sub)
            return
        if isinstance(node, c_ast.For):
            sub = []
            self.item(node, loops, dom, env, position, sub)
            return
        if isinstance(node, c_ast.If):
            st = self.state(loops, dom, env)
            self.check_pure_condition(node.cond, env, st)
            c = self.condition(node.cond, st)
            self.inner(node.iftrue, loops, dom.intersect(c), env, position + [0])
            if node.iffalse is not None:
                self.inner(node.iffalse, loops, dom.intersect(c.complement()), env,
                           position + [1])
            return
        if isinstance(node, c_ast.Decl):
            self.decl(node, loops, dom, env, position)
            return
        if isinstance(node, (c_ast.Assignment, c_ast.UnaryOp)):
            self.statement(node, loops, dom, env, position)
            return
        if isinstance(node, c_ast.EmptyStatement):
            return
        what = {c_ast.While: "while loop", c_ast.DoWhile: "do-while loop",
                c_ast.Return: "return", c_ast.Break: "break", c_ast.Continue: "continue",
                c_ast.Goto: "goto", c_ast.Switch: "switch", c_ast.Label: "label",
                c_ast.FuncCall: "function call", c_ast.Pragma: "pragma"}.get(type(node))
        if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID):
            what = f"call to {node.name.name}()"
        raise self.fail(f"{what or type(node).__name__ + ' statement'} is not a static control "
                        f"statement", node)

    def check_pure_condition(self, cond: Any, env: dict[str, Var], st: State) -> None:
        for n in syntax.walk(cond):
            if isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall)):
                raise self.fail(f"data-dependent condition {printer.opencl_source(cond)}", cond)

    def decl(self, node: c_ast.Decl, loops: list[Loop], dom: isl.Set, env: dict[str, Var],
             position: list[int]) -> None:
        s = symbol_of(node, "local")
        if s.kind not in ("int", "float"):
            raise self.fail(f"declaration of {node.name} ({s.ctype or 'non-scalar'}) inside "
                            f"the region", node)
        if not loops:
            raise self.fail(f"declaration of {node.name} at the top level of the region", node)
        depth = len(loops)
        self.r.privates[node.name] = s.ctype
        st = self.state(loops, dom, env)
        if s.kind == "int" and node.init is not None:
            try:
                env[node.name] = Var("int", value=(self.aff.aff(node.init, st), depth))
            except NonAffine as e:
                env[node.name] = Var("other", why=e.reason)
        self.declared_inside[node.name] = (s.ctype, depth)
        if node.init is not None:
            self.statement(node, loops, dom, env, position)

    def statement(self, node: Any, loops: list[Loop], dom: isl.Set, env: dict[str, Var],
                  position: list[int]) -> None:
        st = self.state(loops, dom, env)
        acc: list[Access] = []
        reduction = None
        if isinstance(node, c_ast.Decl):
            self.expr_accesses(node.init, st, env, acc)
            self.expr_accesses(c_ast.ID(node.name, node.coord), st, env, acc, write=True)
            if isinstance(env.get(node.name), Var) and env[node.name].value is not None:
                env[node.name] = Var("int", value=env[node.name].value)
        elif isinstance(node, c_ast.Assignment):
            self.expr_accesses(node.rvalue, st, env, acc)
            if not isinstance(node.lvalue, (c_ast.ID, c_ast.ArrayRef)):
                raise self.fail(f"assignment to {printer.opencl_source(node.lvalue)}", node)
            if node.op != "=":
                self.expr_accesses(node.lvalue, st, env, acc)  # compound: reads the target
            self.expr_accesses(node.lvalue, st, env, acc, write=True)
            reduction = _reduction_of(node)
            if isinstance(node.lvalue, c_ast.ID) and node.lvalue.name in env \
                    and env[node.lvalue.name].kind == "int":
                raise self.fail(f"assignment to integer variable {node.lvalue.name} used in "
                                f"index expressions", node)
        else:  # ++ / --
            if node.op not in ("++", "--", "p++", "p--") or not isinstance(
                    node.expr, (c_ast.ID, c_ast.ArrayRef)):
                raise self.fail(f"expression statement {printer.opencl_source(node)}", node)
            self.expr_accesses(node.expr, st, env, acc)
            self.expr_accesses(node.expr, st, env, acc, write=True)
            reduction = None
        sid = f"S{self.nstmt}"
        self.nstmt += 1
        named = dom.set_tuple_name(sid)
        for a in acc:
            a.relation = a.relation.set_tuple_name(isl.dim_type.in_, sid)
        write_target = [a.array for a in acc if a.write]
        if reduction is not None and write_target:
            reduction = (write_target[0], reduction)
            reads_target = [a for a in acc if not a.write and a.array == reduction[0]]
            if len(reads_target) != 1:
                reduction = None
        self.r.stmts.append(Stmt(sid, node, named, acc, list(loops), position, _line(node),
                                 reduction))

    def loop(self, node: c_ast.For, loops: list[Loop], dom: isl.Set, env: dict[str, Var],
             position: list[int]) -> Loop:
        it, lb, step = syntax.loop_shape(node)
        if it is None or step is None:
            raise self.fail("for loop that is not counted (iterator = init; bound; "
                            "constant step)", node)
        if step < 0:
            raise self.fail(f"for loop counting down (step {step})", node)
        if it in syntax.modified(node.stmt):
            raise self.fail(f"loop iterator {it} modified in the loop body", node)
        esc = syntax.escapes(node.stmt)
        if esc:
            raise self.fail(f"{esc} inside the loop body", node)
        s = self.sym.get(it)
        if isinstance(node.init, c_ast.DeclList):
            s = symbol_of(node.init.decls[0], "local")
        if s is None or s.kind != "int":
            raise self.fail(f"loop iterator {it} is not an integer variable", node)
        self.r.iterators.setdefault(it, s.ctype)
        depth = len(loops)
        outer = self.state(loops, dom, env)
        lbv = self.int_value(lb, outer)
        inner_dom = dom.insert_dims(isl.dim_type.set, depth, 1)
        inner_dom = inner_dom.set_dim_name(isl.dim_type.set, depth, it)
        env2 = dict(env)
        env2[it] = Var("int", dim=depth)
        lp = Loop(f"L{self.nloop}", node, it, step, inner_dom, depth,
                  loops[-1] if loops else None, [], _line(node))
        self.nloop += 1
        self.r.loops.append(lp)
        st = self.state(loops + [lp], inner_dom, env2)
        iv = self.aff.dim(st, depth)
        lb2 = lbv.add_dims(isl.dim_type.in_, 1)
        d = inner_dom.intersect(iv.ge_set(lb2))
        if step > 1:
            d = d.intersect(iv.sub(lb2).mod_val(isl.Val(step)).eq_set(self.aff.const(st, 0)))
        if node.cond is None:
            raise self.fail("for loop without a condition", node)
        for n in syntax.walk(node.cond):
            if isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall)) and not (
                    isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID)
                    and n.name.name in ("min", "max")):
                raise self.fail("data-dependent loop bound "
                                f"{printer.opencl_source(node.cond)}", node)
        c = self.condition(node.cond, st)
        # the condition must bound the iterator from above (it must stop the loop)
        if not self.aff.monotone(c, st, depth, step):
            raise self.fail(f"loop condition {printer.opencl_source(node.cond)} is not an "
                            f"upper bound on {it}", node)
        d = d.intersect(c)
        lp.domain = d
        st = self.state(loops + [lp], d, env2)
        body = node.stmt.block_items if isinstance(node.stmt, c_ast.Compound) else [node.stmt]
        self.max_depth = max(self.max_depth, depth + 1)
        self.items(body or [], loops + [lp], d, env2, position, lp.children)
        return lp

    # -- the whole region -------------------------------------------------------------------------

    def run(self) -> None:
        self.collect_params()
        dom0 = isl.Set.universe(self.r.space(0))
        env: dict[str, Var] = {}
        self.items(self.r.items, [], dom0, env, [], self.r.tree)
        if not self.r.stmts:
            raise NotScop("the region has no statement", self.r.first_line)
        d = self.max_depth
        sched = None
        reads = writes = None
        for s in self.r.stmts:
            names = [lp.iterator for lp in s.loops]
            outs = []
            for k in range(d + 1):
                outs.append(str(s.position[k]) if k < len(s.position) else "0")
                if k < d:
                    outs.append(f"c{k}" if k < len(names) else "0")
            ins = ", ".join(f"c{k}" for k in range(len(names)))
            pl = ", ".join(self.r.params)
            m = isl.Map(f"[{pl}] -> {{ {s.id}[{ins}] -> [{', '.join(outs)}] }}")
            m = m.intersect_domain(s.domain)
            um = isl.UnionMap.from_map(m)
            sched = um if sched is None else sched.union(um)
            for a in s.accesses:
                am = isl.UnionMap.from_map(a.relation)
                if a.write:
                    writes = am if writes is None else writes.union(am)
                else:
                    reads = am if reads is None else reads.union(am)
        empty = isl.UnionMap.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
        self.r.schedule = sched
        self.r.reads = reads if reads is not None else empty
        self.r.writes = writes if writes is not None else empty


def _reduction_of(node: c_ast.Assignment) -> Optional[str]:
    """The operator of ``x op= e`` / ``x = x op e`` (op ∈ + - * min/max-free), else None."""
    if node.op in ("+=", "-=", "*="):
        if not _mentions(node.rvalue, node.lvalue):
            return node.op[0]
        return None
    if node.op == "=" and isinstance(node.rvalue, c_ast.BinaryOp) and node.rvalue.op in "+*-":
        r = node.rvalue
        if _same(r.left, node.lvalue) and not _mentions(r.right, node.lvalue):
            return r.op
        if r.op in "+*" and _same(r.right, node.lvalue) and not _mentions(r.left, node.lvalue):
            return r.op
    return None


def _same(a: Any, b: Any) -> bool:
    return printer.opencl_source(a) == printer.opencl_source(b)


def _mentions(expr: Any, lv: Any) -> bool:
    base = syntax.flatten_ref(lv)[0] if isinstance(lv, c_ast.ArrayRef) else lv
    name = base.name if isinstance(base, c_ast.ID) else None
    return any(isinstance(n, c_ast.ID) and n.name == name for n in syntax.walk(expr))


# ----------------------------------------------------------------------------------------------
# Finding regions
# ----------------------------------------------------------------------------------------------


def function_symbols(fd: c_ast.FuncDef, globals_: dict[str, Symbol]) -> dict[str, Symbol]:
    """Parameters, locals (any block) and globals visible in ``fd``."""
    out = dict(globals_)
    params = fd.decl.type.args.params if fd.decl.type.args else []
    for p in params:
        if isinstance(p, c_ast.Decl) and p.name:
            out[p.name] = symbol_of(p, "param")
    for n in syntax.walk(fd.body):
        if isinstance(n, c_ast.Decl) and n.name and not isinstance(n.type, c_ast.FuncDecl):
            out.setdefault(n.name, symbol_of(n, "local"))
            if out[n.name].scope == "global":
                out[n.name] = symbol_of(n, "local")
    return out


def _last_line(node: Any) -> int:
    return max((_line(n) for n in syntax.walk(node)), default=_line(node))


def build_region(index: int, fd: c_ast.FuncDef, block: c_ast.Compound, lo: int, hi: int,
                 symbols: dict[str, Symbol], pragma: bool) -> Region:
    """The model of ``block.block_items[lo:hi]``; ``error`` is set when it is not a SCoP."""
    items = list((block.block_items or [])[lo:hi])
    r = Region(index, fd.decl.name, items, _line(items[0]) if items else 0,
               max((_last_line(x) for x in items), default=0), pragma, func_node=fd,
               parent_block=block, span=(lo, hi))
    try:
        _Builder(r, symbols).run()
    except NotScop as e:
        r.error = e
    except isl.Error as e:  # pragma: no cover - defensive: report, never crash
        r.error = NotScop(f"isl could not model the region: {e}", r.first_line)
    return r


def _qualifies(fd: c_ast.FuncDef, block: c_ast.Compound, k: int,
               symbols: dict[str, Symbol]) -> Optional[NotScop]:
    r = build_region(-1, fd, block, k, k + 1, symbols, False)
    return r.error


def find_regions(ast: c_ast.FileAST, filename: str, function: Optional[str] = None
                 ) -> tuple[list[Region], list[dict[str, Any]]]:
    """SCoP regions of every function defined in ``filename`` (or only ``function``).

    Returns the regions (modelled or not) and notes about loops left out of any region.
    """
    globals_: dict[str, Symbol] = {}
    for e in ast.ext:
        if isinstance(e, c_ast.Decl) and e.name and not isinstance(e.type, c_ast.FuncDecl) \
                and not preprocessor.is_polyfuse_header(e):
            globals_[e.name] = symbol_of(e, "global")
    regions: list[Region] = []
    notes: list[dict[str, Any]] = []
    for fd in ast.ext:
        if not isinstance(fd, c_ast.FuncDef) or preprocessor.is_polyfuse_header(fd):
            continue
        if fd.coord is not None and fd.coord.file != filename:
            continue
        if function is not None and fd.decl.name != function:
            continue
        symbols = function_symbols(fd, globals_)
        pragma_blocks = [n for n in syntax.walk(fd.body) if isinstance(n, c_ast.Compound) and any(
            isinstance(x, c_ast.Pragma) and x.string.strip() == "scop"
            for x in (n.block_items or []))]
        if pragma_blocks:
            for blk in pragma_blocks:
                items = blk.block_items or []
                k = 0
                while k < len(items):
                    x = items[k]
                    if isinstance(x, c_ast.Pragma) and x.string.strip() == "scop":
                        j = k + 1
                        while j < len(items) and not (isinstance(items[j], c_ast.Pragma)
                                                      and items[j].string.strip() == "endscop"):
                            j += 1
                        regions.append(build_region(len(regions), fd, blk, k + 1, j, symbols,
                                                    True))
                        k = j
                    k += 1
            continue
        _auto(fd, fd.body, symbols, regions, notes)
    return regions, notes


def _has_loop(node: Any) -> bool:
    return any(isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile)) for n in syntax.walk(node))


def _auto(fd: c_ast.FuncDef, block: c_ast.Compound, symbols: dict[str, Symbol],
          regions: list[Region], notes: list[dict[str, Any]]) -> None:
    """Maximal runs of qualifying statements of ``block``; recurse into the others."""
    items = block.block_items or []
    k = 0
    while k < len(items):
        x = items[k]
        err = None
        if isinstance(x, c_ast.Decl) or isinstance(x, c_ast.Pragma):
            k += 1
            continue
        if _has_loop(x) or isinstance(x, (c_ast.Assignment, c_ast.UnaryOp)):
            err = _qualifies(fd, block, k, symbols)
        else:
            err = NotScop("not a loop", _line(x))
        if err is None:
            j = k + 1
            while j < len(items) and not isinstance(items[j], (c_ast.Decl, c_ast.Pragma)) and (
                    _has_loop(items[j]) or isinstance(items[j], (c_ast.Assignment,
                                                                 c_ast.UnaryOp))) \
                    and _qualifies(fd, block, j, symbols) is None:
                j += 1
            # trim plain statements at the end; keep runs that contain a loop
            while j > k and not _has_loop(items[j - 1]):
                j -= 1
            while k < j and not _has_loop(items[k]):
                k += 1
            if j > k:
                r = build_region(len(regions), fd, block, k, j, symbols, False)
                if r.error is None:
                    regions.append(r)
                    k = j
                    continue
            k = max(k + 1, j)
            continue
        if _has_loop(x):
            if not any(n["line"] == (err.line or _line(x)) and n["construct"] == err.reason
                       for n in notes):
                notes.append({"function": fd.decl.name, "line": err.line or _line(x),
                              "construct": err.reason,
                              "message": f"loop nest at line {_line(x)} is not a static "
                                         f"control part: {err}"})
            for sub in _sub_blocks(x):
                _auto(fd, sub, symbols, regions, notes)
        k += 1
    _dedupe(regions)


def _sub_blocks(x: Any) -> list[c_ast.Compound]:
    """Blocks directly below a statement (a lone body statement gets a synthetic block)."""
    if x is None:
        return []
    if isinstance(x, c_ast.Compound):
        return [x]
    if isinstance(x, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch, c_ast.Label,
                      c_ast.Case, c_ast.Default)):
        body = getattr(x, "stmt", None) if not isinstance(x, (c_ast.Case, c_ast.Default)) \
            else c_ast.Compound(x.stmts, x.coord)
        if body is not None and not isinstance(body, c_ast.Compound):
            body = c_ast.Compound([body], body.coord)
        return [body] if body is not None else []
    if isinstance(x, c_ast.If):
        return _sub_blocks(_as_block(x.iftrue)) + _sub_blocks(_as_block(x.iffalse))
    return []


def _as_block(x: Any) -> Any:
    if x is None or isinstance(x, c_ast.Compound):
        return x
    return c_ast.Compound([x], x.coord)


def _dedupe(regions: list[Region]) -> None:
    """Drop regions nested inside another region (the walk can find both)."""
    keep: list[Region] = []
    for r in regions:
        if any(o is not r and o.func_node is r.func_node and _contains(o, r) for o in regions):
            continue
        keep.append(r)
    regions[:] = keep
    for k, r in enumerate(regions):
        r.index = k


def _contains(outer: Region, inner: Region) -> bool:
    ids = {id(n) for it in outer.items for n in syntax.walk(it)}
    return all(id(n) in ids for n in inner.items)
