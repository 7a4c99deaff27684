"""C loops in the host program: a counted ``for`` becomes a symbolic :class:`HostLoop` (over
pairs of iterations where the state it carries alternates between two values), or is
unrolled; other loops are iterated while their condition is known; loops without OpenCL
calls are summarised past a budget of iterations per loop nest."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.c import syntax
from polyfuse.core.program import ArgBinding, HostLoop, PolyfuseError, UnsupportedError
from polyfuse.frontend.host.memory import State, changed_slots, written_slots
from polyfuse.frontend.host.signals import (
    Break,
    Continue,
    NeedUnroll,
)
from polyfuse.frontend.host.symbolic import free_syms, subs_value
from polyfuse.frontend.host.values import (
    ONE,
    UNK,
    Arr,
    Box,
    BufRef,
    Num,
    Poison,
    Rec,
    Ref,
    Runtime,
    Source,
    Unknown,
    havoc_diff,
    param_hint,
    src_of,
    truth_of,
)

if TYPE_CHECKING:
    from polyfuse.frontend.host.evaluator import CEvaluator

#: the largest trip count of a host loop that polyfuse unrolls when it cannot keep it symbolic
MAX_UNROLL = 1024


#: iterations of loops without OpenCL calls interpreted one by one in a whole loop nest; past
#: it, such loops are summarised (or kept symbolic, forgetting what they compute)
NEST_BUDGET = 4 * MAX_UNROLL
#: the operations (launches, transfers) unrolled host loops may record in all: past it the
#: dependence analysis of the unrolled program would not end in reasonable time (SHOC Triad's
#: 9,234, 511 of them launches, take 50 s to load, analyse, plan and verify)
MAX_OPERATIONS = 12 * MAX_UNROLL


#: the fewest iterations of a host loop whose carried state alternates between two values
#: (buffers swapped every step) that polyfuse keeps symbolic over pairs of iterations rather
#: than unrolls: fewer are unrolled, each launch exact
PAIRED_FROM = 64
#: why a loop whose operations use the host state it carries is not kept symbolic as written
_CARRIED = "the loop carries host state its operations use"

_READ_ONLY_ADDRESS = {"clSetKernelArg", "printf", "fprintf"}


def _names(node: Any) -> set[str]:
    out: set[str] = set()

    class V(c_ast.NodeVisitor):
        def visit_ID(self, n: c_ast.ID) -> None:
            out.add(n.name)

    if node is not None:
        V().visit(node)
    return out


def _assigned_names(node: Any) -> set[str]:
    """Variables a statement may assign (directly, by ++/--, or by taking their address)."""
    out: set[str] = set()

    def base(n: Any) -> Optional[str]:
        while isinstance(n, (c_ast.ArrayRef, c_ast.StructRef)):
            n = n.name
        return n.name if isinstance(n, c_ast.ID) else None

    class V(c_ast.NodeVisitor):
        def visit_Assignment(self, n: c_ast.Assignment) -> None:
            b = base(n.lvalue)
            if b:
                out.add(b)
            self.generic_visit(n)

        def visit_FuncCall(self, n: c_ast.FuncCall) -> None:
            name = n.name.name if isinstance(n.name, c_ast.ID) else ""
            if name in _READ_ONLY_ADDRESS and n.args is not None:
                for a in n.args.exprs:  # &x handed to these calls is only read
                    while isinstance(a, c_ast.Cast):
                        a = a.expr
                    if isinstance(a, c_ast.UnaryOp) and a.op == "&":
                        self.generic_visit(a.expr)
                    else:
                        self.visit(a)
                return
            self.generic_visit(n)

        def visit_UnaryOp(self, n: c_ast.UnaryOp) -> None:
            if n.op in ("++", "--", "p++", "p--", "&"):
                b = base(n.expr)
                if b:
                    out.add(b)
            self.generic_visit(n)

    if node is not None:
        V().visit(node)
    return out


def _step_of(nxt: Any, it: str) -> Optional[int]:
    if isinstance(nxt, c_ast.UnaryOp) and nxt.op in ("++", "p++") and \
            isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == it:
        return 1
    if isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID) and \
            nxt.lvalue.name == it:
        r = nxt.rvalue
        if nxt.op == "+=" and isinstance(r, c_ast.Constant) and r.type == "int":
            return _int_const(r.value)
        if nxt.op == "=" and isinstance(r, c_ast.BinaryOp) and r.op == "+":
            if isinstance(r.left, c_ast.ID) and r.left.name == it and \
                    isinstance(r.right, c_ast.Constant) and r.right.type == "int":
                return _int_const(r.right.value)
    return None


def _int_const(text: str) -> Optional[int]:
    try:
        return int(text.rstrip("uUlL"), 0)
    except ValueError:
        return None



@contextlib.contextmanager
def loop_nest(ev: CEvaluator) -> Iterator[None]:
    """One budget of concretely interpreted iterations for a whole loop nest (a loop
    inside a loop must not multiply the work)."""
    if ev.nest_depth == 0:
        ev.iterations_left = NEST_BUDGET
    ev.nest_depth += 1
    try:
        yield
    finally:
        ev.nest_depth -= 1


def for_(ev: CEvaluator, node: c_ast.For) -> None:
    ev.mem.frames[-1].scopes.append({})
    try:
        with loop_nest(ev):
            counted = counted_bounds(ev, node)
            down = descending(node) if counted is None else None
            if counted is not None:
                counted_loop(ev, node, *counted)
            elif down is not None:
                for stmt in down:
                    ev.exec(stmt)
            else:
                if node.init is not None:
                    ev.exec(node.init)
                generic_loop(ev, node, node.cond, node.stmt, node.next, False)
    finally:
        ev.mem.frames[-1].scopes.pop()


def while_(ev: CEvaluator, node: c_ast.While) -> None:
    with loop_nest(ev):
        generic_loop(ev, node, node.cond, node.stmt, None, False)


def do_while(ev: CEvaluator, node: c_ast.DoWhile) -> None:
    with loop_nest(ev):
        generic_loop(ev, node, node.cond, node.stmt, None, True)


#: id of a descending for -> (that loop, its ascending form); the loop is kept so that its
#: id is not reused
_DESCENDING: dict[int, tuple[c_ast.For, list]] = {}


def descending(node: c_ast.For) -> Optional[list]:
    """``for (t = a; t >= b; t--) S`` as statements with a counted loop that counts up
    (``k = 0; k < a - b + 1; k++`` with ``t = a - k;`` first in its body) and ``t``'s value
    after the loop, so that a backward sweep of launches stays symbolic; None for other
    loops.  ``a`` and ``b`` must not be assigned in the body (then they are re-read)."""
    known = _DESCENDING.get(id(node))
    if known is not None and known[0] is node:
        return known[1]
    init, c, co = node.init, node.cond, node.coord
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init:
        it, start = init.decls[0].name, init.decls[0].init
    elif isinstance(init, c_ast.Assignment) and init.op == "=" and \
            isinstance(init.lvalue, c_ast.ID):
        it, start = init.lvalue.name, init.rvalue
    else:
        return None
    nxt = node.next
    step_down = isinstance(nxt, c_ast.UnaryOp) and nxt.op in ("--", "p--") and \
        isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == it or \
        isinstance(nxt, c_ast.Assignment) and nxt.op == "-=" and \
        isinstance(nxt.lvalue, c_ast.ID) and nxt.lvalue.name == it and \
        isinstance(nxt.rvalue, c_ast.Constant) and nxt.rvalue.value == "1"
    if not step_down or not isinstance(c, c_ast.BinaryOp) or c.op not in (">=", ">") or \
            not (isinstance(c.left, c_ast.ID) and c.left.name == it):
        return None
    stop = c.right
    assigned = _assigned_names(node.stmt)
    if (_names(start) | _names(stop)) & (assigned | {it}):
        return None
    k = f"{it}_down"
    trip = c_ast.BinaryOp("-", start, stop, co)
    if c.op == ">=":
        trip = c_ast.BinaryOp("+", trip, c_ast.Constant("int", "1", co), co)
    body = c_ast.Compound([c_ast.Assignment("=", c_ast.ID(it, co),
                                            c_ast.BinaryOp("-", start, c_ast.ID(k, co), co), co),
                           node.stmt], co)
    counter = c_ast.Decl(k, [], [], [], [], c_ast.TypeDecl(
        k, [], None, c_ast.IdentifierType(["long"])), c_ast.Constant("int", "0", co), None, co)
    loop = c_ast.For(c_ast.Assignment("=", c_ast.ID(k, co), c_ast.Constant("int", "0", co), co),
                     c_ast.BinaryOp("<", c_ast.ID(k, co), trip, co),
                     c_ast.UnaryOp("p++", c_ast.ID(k, co), co), body, co)
    last = stop if c.op == ">" else c_ast.BinaryOp("-", stop, c_ast.Constant("int", "1", co), co)
    after = c_ast.Assignment("=", c_ast.ID(it, co), c_ast.TernaryOp(
        c_ast.BinaryOp(c.op, start, stop, co), last, start, co), co)
    out = [init, counter, loop, after]
    _DESCENDING[id(node)] = (node, out)
    return out


def counted_bounds(ev: CEvaluator, node: c_ast.For) -> Optional[tuple]:
    """(iterator, lower node, upper node, inclusive, step) of a counted loop, or None."""
    it = lower = None
    init = node.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init:
        it, lower = init.decls[0].name, init.decls[0].init
    elif isinstance(init, c_ast.Assignment) and init.op == "=" and \
            isinstance(init.lvalue, c_ast.ID):
        it, lower = init.lvalue.name, init.rvalue
    if it is None or not isinstance(node.cond, c_ast.BinaryOp):
        return None
    c = node.cond
    flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}
    if isinstance(c.left, c_ast.ID) and c.left.name == it:
        op, upper = c.op, c.right
    elif isinstance(c.right, c_ast.ID) and c.right.name == it and c.op in flip:
        op, upper = flip[c.op], c.left
    else:
        return None
    if op not in ("<", "<=", "!="):
        return None
    step = _step_of(node.next, it)
    if step is None or step <= 0 or (op == "!=" and step != 1):
        return None
    assigned = _assigned_names(node.stmt)
    if it in assigned or _names(upper) & (assigned | {it}):
        return None
    if isinstance(init, c_ast.DeclList) and _names(lower) & {it}:
        return None
    return it, lower, upper, op == "<=", step


def counted_loop(ev: CEvaluator, node: c_ast.For, it: str, lower_n: c_ast.Node, upper_n: c_ast.Node,
                 inclusive: bool, step: int) -> None:
    if isinstance(node.init, c_ast.DeclList):
        ev.exec(node.init)
    else:
        ev.eval(node.init)
    sid = ev.mem.lookup(it)
    lower = ev.mem.read(Ref(sid)) if sid is not None else UNK
    upper = ev.eval(upper_n)
    if not (isinstance(lower, Num) and not lower.flt and isinstance(upper, Num)
            and not upper.flt):
        generic_loop(ev, node, node.cond, node.stmt, node.next, False)
        return
    lo, hi = lower.e, upper.e + (1 if inclusive else 0)
    trip = None
    if (hi - lo).is_number:
        trip = max(0, -int((lo - hi) // step))
        if trip == 0:
            ev.mem.write(Ref(sid), Num(lo))
            return
        if trip == 1:  # one iteration: its iterator is known (an option list of one entry)
            unroll(ev, node, sid, [lo], "it runs once")
            return
    base = ev.mem.state.clone()
    active = {lp.iterator for lp in ev.ctx.loops}
    name = syntax.fresh_name(it, lambda n: n in ev.params.symbols or n in active)
    sym = sympy.Symbol(name)
    hl = HostLoop(iterator=name, lower=lo, upper=hi, step=step, loc=ev.ctx.loc(node))
    undecided, returns = ev.undecided, list(ev.mem.frames[-1].cond_returns)
    forgotten, budget = ev.ctx.forgotten, ev.iterations_left
    try:
        inner = symbolic_loop(ev, node, sid, sym, hl)
    except PolyfuseError:
        if trip is None or trip > MAX_UNROLL:
            raise
        # what the body needs is known only per iteration (a launch geometry the loop carries
        # and updates under `index % 4 == 0`): run the iterations one by one
        ev.mem.state = base
        unroll(ev, node, sid, [lo + i * step for i in range(trip)],
               "what its body needs is known only per iteration")
        return
    except NeedUnroll as need:
        ev.mem.state = base
        if trip is None and need.why == "the loop body always breaks" and \
                first_iteration_breaks(ev, node, sid, lo):
            return
        if (trip is None or trip > min(MAX_UNROLL, ev.iterations_left)) and \
                summarise(ev, node, node.stmt, None, None, sid, False):
            final = hi if trip is None else lo + step * trip
            ev.mem.write(Ref(sid), Num(final) if step == 1 or trip is not None else UNK)
            return
        if need.why == _CARRIED and trip is not None and trip >= PAIRED_FROM and \
                paired_loop(ev, node, sid, it, lo, step, trip):
            return
        if trip is None or trip > MAX_UNROLL:
            what = f"its trip count is not a constant (from {lo} to {hi})" \
                f"{ev.params.hint(hi - lo)}" \
                if trip is None else \
                (f"its trip count {trip} exceeds {MAX_UNROLL}; analyze a smaller problem "
                 "size (-D SMALL_DATASET, -D N=256, or --args with a smaller size)")
            raise ev.ctx.error(
                f"host loop cannot be kept symbolic ({need.why}) and cannot be unrolled: "
                f"{what}", node, UnsupportedError) from None
        unroll(ev, node, sid, [lo + i * step for i in range(trip)], need.why)
        return
    lost = losses(ev, base, sid, sym, ev.undecided > undecided, forgotten)
    if trip is not None and lost and no_operations(base, ev.mem.state):
        # the symbolic pass lost what concrete iterations know (an option letter of a known
        # string, a size rounded up bit by bit, device limits clamped per dimension)
        work = max(1, inner)  # the inner iterations one iteration runs concretely
        if trip <= MAX_UNROLL and trip * work <= budget:
            ev.mem.state = base
            ev.mem.frames[-1].cond_returns[:] = returns
            ev.iterations_left = budget
            unroll(ev, node, sid, [lo + i * step for i in range(trip)], lost)
            return
        fit = min(MAX_UNROLL, budget // work)
        why = (f"{lost}, and its {trip} iterations x {work} inner iterations each do not fit "
               f"the {budget} left of its loop nest's budget of {NEST_BUDGET} iterations run "
               f"one by one (at most {fit} of its iterations would)")
        last = lo + step * (trip - 1)
        leave_loop(ev, sym, last, sid, lo + step * trip, base)
        name_forgotten(ev, base, sid, ev.source(f"left unknown by a host loop ({why})", node))
        return
    last = lo + step * (trip - 1) if trip is not None else (hi - 1 if step == 1 else None)
    leave_loop(ev, sym, last, sid, hi if trip is None else lo + step * trip, base)


def paired_loop(ev: CEvaluator, node: c_ast.For, sid: int, it: str, lo: Any, step: int,
                trip: int) -> bool:
    """A loop whose state alternates between two values (``cur``/``next`` swapped every
    iteration) as a symbolic loop over pairs of iterations, ``it = lo + 2*step*p`` then
    ``lo + 2*step*p + step``, the odd last iteration after it: the state each pair starts
    from is the same, as a symbolic loop requires (checked as for any loop), so the
    launches stay two per pair rather than ``trip`` unrolled ones.  False, with the state
    untouched, when the state does not come back after two iterations or the loop makes no
    OpenCL operation (what it computes is then known only by running it)."""
    base = ev.mem.state.clone()
    returns = list(ev.mem.frames[-1].cond_returns)
    budget, forgotten = ev.iterations_left, ev.ctx.forgotten
    active = {lp.iterator for lp in ev.ctx.loops}
    name = syntax.fresh_name(f"{it}_pair", lambda n: n in ev.params.symbols or n in active)
    sym = sympy.Symbol(name)
    pairs = trip // 2
    hl = HostLoop(iterator=name, lower=sympy.Integer(0), upper=sympy.Integer(pairs),
                  loc=ev.ctx.loc(node))
    first = lo + 2 * step * sym
    try:
        symbolic_loop(ev, node, sid, sym, hl, (first, first + step))
        if no_operations(base, ev.mem.state):  # host values only: exact when unrolled
            raise NeedUnroll("no operations")
    except (NeedUnroll, PolyfuseError):
        ev.mem.state = base
        ev.mem.frames[-1].cond_returns[:] = returns
        ev.iterations_left, ev.ctx.forgotten = budget, forgotten
        return False
    leave_loop(ev, sym, pairs - 1, sid, lo + 2 * step * pairs, base)
    if trip % 2:
        unroll(ev, node, sid, [lo + step * (trip - 1)], "the odd iteration after the pairs")
    ev.mem.write(Ref(sid), Num(lo + step * trip))
    return True


def losses(ev: CEvaluator, before: State, sid: int, sym: sympy.Symbol, undecided: bool,
           forgotten: int) -> str:
    """What the symbolic pass over a host loop lost that running its iterations one by one
    would know ('' when nothing): a condition it left undecided, a known value it stored at
    an index that is the iterator or that changes per iteration (counted in
    ``ctx.forgotten``), or a host number that depends on the iterator (unknown after the
    loop)."""
    if undecided:
        return "a condition in its body is decided only per iteration"
    if ev.ctx.forgotten > forgotten:
        return "what it computes differs from one iteration to the next"
    for k in changed_slots(before, ev.mem.state):
        v = ev.mem.state.slots[k].value
        src = src_of(v)
        if k == sid or k not in before.slots:  # a variable of the body: dead after it
            continue
        if isinstance(v, Num) and sym in v.e.free_symbols or src is not None and src.loop_index:
            return "a host number it computes depends on its iterator"
        if forgets_known(before.slots[k].value, v):
            return "a host number known before it is unknown after it"
    return ""


def forgets_known(old: Any, new: Any) -> bool:
    """Whether ``new`` has lost a known number that ``old`` held (in arrays and structs
    element by element)."""
    if isinstance(old, Num):
        return old.e.is_number and not (isinstance(new, Num) and new.e.is_number)
    if isinstance(old, Arr) and isinstance(new, Arr) and old.length is not None and \
            old.length <= MAX_UNROLL:  # a table, not bulk host data
        return any(forgets_known(v, new.get(k)) for k, v in old.elems)
    if isinstance(old, Rec) and isinstance(new, Rec):
        return any(forgets_known(v, new.get(k)) for k, v in old.fields)
    return False


def name_forgotten(ev: CEvaluator, before: State, sid: int, src: Source) -> None:
    """Host numbers a symbolic loop left unknown get ``src``, named after their variable,
    so that a refusal that depends on one says why and which ``--param`` binds it."""
    def mark(v: Any) -> Any:
        if isinstance(v, Unknown) and v.src is None:
            return Unknown(v.flt, src)
        if isinstance(v, Arr):
            return Arr(v.length, tuple((i, mark(e)) for i, e in v.elems), mark(v.default))
        return v

    for k in changed_slots(before, ev.mem.state):
        slot = ev.mem.state.slots[k]
        if k == sid:
            continue
        if slot.ctype.kind in ("int", "float") and isinstance(slot.value, Unknown) and \
                slot.value.src is None:
            ev.mem.state.slots[k] = dataclasses.replace(
                slot, value=ev.params.coerce(Runtime(src), slot.ctype, slot.name))
        else:
            ev.mem.state.slots[k] = dataclasses.replace(slot, value=mark(slot.value))


def no_operations(before: State, after: State) -> bool:
    """Whether a path from ``before`` to ``after`` made no OpenCL operation or object."""
    return len(after.ops) == len(before.ops) and set(after.buffers) == set(before.buffers) \
        and after.kobjs == before.kobjs


def symbolic_loop(ev: CEvaluator, node: c_ast.For, sid: int, sym: sympy.Symbol,
                  hl: HostLoop, iterates: Optional[tuple] = None) -> int:
    """Interpret the body once with a symbolic iterator (twice when it carries host state);
    the iterations of inner loops the first pass ran concretely.  ``iterates``: the
    iterator's values in consecutive runs of the body that one iteration of ``hl`` stands
    for (``(sym,)`` unless a pair of iterations is one)."""
    iterates = iterates or (sym,)
    ev.params.reserve(hl.iterator)  # parameters never take an iterator's name
    ev.ctx.loops.append(hl)
    ev.ctx.loop_syms.add(sym)
    try:
        s0 = ev.mem.state.clone()
        counts = dict(ev.cl.scratch_count)
        ev.mem.state.uncertain_break = None
        left = ev.iterations_left
        bodies(ev, node.stmt, sid, iterates)
        work = left - ev.iterations_left
        s1 = ev.mem.state
        ops1 = s1.ops[len(s0.ops):]
        if ops1 and s1.uncertain_break is not None:
            raise early_exit_error(ev, s1.uncertain_break)
        variant_slots = [k for k in changed_slots(s0, s1) if k != sid]
        variant_k = [o for o in s0.kobjs if o in s1.kobjs and s0.kobjs[o] != s1.kobjs[o]]
        new_k = [o for o in s1.kobjs if o not in s0.kobjs]
        scratch = set(s1.buffers) - set(s0.buffers)
        if new_k:
            raise NeedUnroll("kernels are created inside the loop")
        if scratch and escapes(s0, s1, scratch):
            raise NeedUnroll("a buffer created inside the loop outlives its iteration")
        if variant_slots or variant_k:
            s2 = s1.clone()
            for k in variant_slots:
                slot = s2.slots[k]
                s2.slots[k] = dataclasses.replace(
                    slot, value=forget(ev, s0.slots[k].value, slot.value))
            for o in variant_k:
                ks = s2.kobjs[o]
                s2.kobjs[o] = dataclasses.replace(ks, bindings=tuple(
                    (i, b if s0.kobjs[o].bound().get(i) == b else
                     Poison("changes from one iteration to the next"))
                    for i, b in ks.bindings))
            s2.ops = list(s0.ops)
            ev.mem.state = s2
            ev.cl.scratch_count = dict(counts)  # the second pass reuses the scratch buffers
            try:
                bodies(ev, node.stmt, sid, iterates)
            except PolyfuseError:
                raise NeedUnroll(_CARRIED) from None
            if ev.mem.state.ops[len(s0.ops):] != ops1 or \
                    any(ev.mem.state.buffers.get(b) != s1.buffers[b] for b in scratch):
                raise NeedUnroll(_CARRIED)
            ev.mem.state.ops = s0.ops + ops1
            for k in variant_slots:
                if k in ev.mem.state.slots and not scratch_handle(ev.mem.state.slots[k].value,
                                                                  scratch):
                    slot = ev.mem.state.slots[k]
                    ev.mem.state.slots[k] = dataclasses.replace(
                        slot, value=havoc_diff(s0.slots[k].value, slot.value))
        ev.mem.state.uncertain_break = s0.uncertain_break
        return work
    finally:
        ev.ctx.loops.pop()
        ev.ctx.loop_syms.discard(sym)


def forget(ev: CEvaluator, old: Any, new: Any) -> Any:
    """``havoc_diff(old, new)``, counting in ``ctx.forgotten`` a known value it forgets."""
    out = havoc_diff(old, new)
    if out != new and not isinstance(new, (Unknown, Runtime)):
        ev.ctx.forgotten += 1
    return out


def escapes(s0: State, s1: State, scratch: set[str]) -> bool:
    """Whether a handle of a buffer created in the loop body (``scratch``) is left, after the
    body, in a variable that existed before it (directly or through pointers to variables the
    body made), other than a variable holding just the handle (``cl_mem tmp;`` declared before
    the loop: the next iteration finds it unknown until it assigns it, and after the loop it
    is the last iteration's buffer). Otherwise each iteration's buffer is dead when the next
    one is created, and one buffer reused by every iteration computes the same: kernels still
    bound to it after the loop see the last iteration's, and each iteration's accesses to it
    may conflict with the others', which the dependence analysis of one buffer covers."""
    seen: set[int] = set()

    def holds(v: Any) -> bool:
        if isinstance(v, BufRef):
            return v.name in scratch
        if isinstance(v, Poison):  # a handle stored at an index that varies (``bufs[it]``)
            return True
        if isinstance(v, Arr):
            return any(holds(e) for _, e in v.elems) or holds(v.default)
        if isinstance(v, Rec):
            return any(holds(e) for _, e in v.fields)
        if isinstance(v, (Ref, Box)) and v.slot not in s0.slots and v.slot not in seen:
            seen.add(v.slot)
            slot = s1.slots.get(v.slot)
            return slot is not None and holds(slot.value)
        return False

    return any(holds(s1.slots[k].value) for k in changed_slots(s0, s1)
               if not scratch_handle(s1.slots[k].value, scratch))


def scratch_handle(v: Any, scratch: set[str]) -> bool:
    return isinstance(v, BufRef) and v.name in scratch


def first_iteration_breaks(ev: CEvaluator, node: c_ast.For, sid: int, lo: Any) -> bool:
    """A search loop with a run-time trip count that leaves in its first iteration
    (``for (i = 0; i < nplatforms; i++) { ...; if (found) break; }``): run that iteration.
    Only for loops without operations; otherwise the caller refuses the loop."""
    base = ev.mem.state.clone()
    ev.mem.write(Ref(sid), Num(lo))
    try:
        ev.exec(node.stmt)
    except Break:
        if len(ev.mem.state.ops) == len(base.ops) and ev.mem.state.buffers == base.buffers:
            return True
    except Continue:
        pass
    ev.mem.state = base
    return False


def bodies(ev: CEvaluator, body: c_ast.Node, sid: int, iterates: tuple) -> None:
    """Run the loop body once per iterator value in ``iterates``, in order."""
    for value in iterates:
        ev.mem.write(Ref(sid), Num(value))
        body_once(ev, body)


def body_once(ev: CEvaluator, body: c_ast.Node) -> None:
    try:
        ev.exec(body)
    except Continue:
        pass
    except Break:
        raise NeedUnroll("the loop body always breaks") from None


def leave_loop(ev: CEvaluator, sym: sympy.Symbol, last: Any, sid: int, final: Any,
               before: State) -> None:
    """Replace the iterator in bindings that outlive the loop by its last value (only the
    slots the loop wrote can hold it: ``before`` is the state the loop started from)."""
    for o, ks in list(ev.mem.state.kobjs.items()):
        binds = []
        for i, b in ks.bindings:
            if isinstance(b, ArgBinding) and sym in free_syms(b.value, b.local_bytes):
                if last is None:
                    b = dataclasses.replace(b, value=None)
                else:
                    b = dataclasses.replace(
                        b, value=subs_value(b.value, sym, last),
                        local_bytes=subs_value(b.local_bytes, sym, last))
            binds.append((i, b))
        ev.mem.state.kobjs[o] = dataclasses.replace(ks, bindings=tuple(binds))
    for k in written_slots(before, ev.mem.state):
        slot = ev.mem.state.slots[k]
        if isinstance(slot.value, Num) and not slot.value.e.is_Number and \
                sym in slot.value.e.free_symbols:
            ev.mem.state.slots[k] = dataclasses.replace(slot, value=UNK)
    if sid in ev.mem.state.slots:
        ev.mem.write(Ref(sid), Num(final) if final is not None else UNK)


def unroll(ev: CEvaluator, node: c_ast.For, sid: int, values: list, why: str) -> None:
    with no_early_exit(ev):
        ev.iterations_left -= len(values)
        start = len(ev.mem.state.ops)
        for k, v in enumerate(values):
            ev.mem.write(Ref(sid), Num(sympy.Integer(v)))
            try:
                ev.exec(node.stmt)
            except Continue:
                pass
            except Break:
                return
            per = len(ev.mem.state.ops) - start
            if per * len(values) > MAX_OPERATIONS * (k + 1) or \
                    len(ev.mem.state.ops) > MAX_OPERATIONS:
                raise ev.ctx.error(
                    f"host loop cannot be kept symbolic ({why}) and unrolling its "
                    f"{len(values)} iterations gives about {per * len(values) // (k + 1)} "
                    f"operations, more than the {MAX_OPERATIONS} polyfuse analyses; analyse "
                    "a smaller problem size (-D, or --args with a smaller size)", node,
                    UnsupportedError)
        if values:
            ev.mem.write(Ref(sid), Num(sympy.Integer(values[-1]) + 1))


def early_exit_error(ev: CEvaluator, node: c_ast.Node) -> PolyfuseError:
    src = ev.break_src.get(id(node))
    why = f": its condition depends on {src.describe()}{param_hint(src)}" if src else ""
    return ev.ctx.error("launches in a host loop that may be left early (break or continue "
                        f"under a data-dependent condition){why}", node, UnsupportedError)


@contextlib.contextmanager
def no_early_exit(ev: CEvaluator) -> Iterator[None]:
    """Refuse a loop with operations that a data-dependent break/continue may cut short."""
    saved, n_ops = ev.mem.state.uncertain_break, len(ev.mem.state.ops)
    ev.mem.state.uncertain_break = None
    yield
    flag = ev.mem.state.uncertain_break
    if flag is not None and len(ev.mem.state.ops) > n_ops:
        raise early_exit_error(ev, flag)
    ev.mem.state.uncertain_break = saved


def generic_loop(ev: CEvaluator, node: c_ast.Node, cond: Optional[c_ast.Node], body: c_ast.Node,
                 nxt: Optional[c_ast.Node], do_first: bool) -> None:
    """A loop that is not counted: iterate it while its condition is known, else summarize."""
    base = ev.mem.state.clone()
    scopes = [dict(s) for s in ev.mem.frames[-1].scopes]
    open_src = None  # what the condition depends on where it is not known
    with no_early_exit(ev):
        for i in range(MAX_UNROLL + 1):
            if i or not do_first:
                c = ev.eval(cond) if cond is not None else ONE
                t = truth_of(c)
                if t is False:
                    return
                if t is None or i == MAX_UNROLL:
                    open_src = src_of(c) or next(
                        (ev.params.origins[str(x)] for x in free_syms(c.e)
                         if str(x) in ev.params.origins), None) if isinstance(c, Num) \
                        else src_of(c)
                    break
                if ev.iterations_left <= 0 and len(ev.mem.state.ops) == len(base.ops):
                    break
            ev.iterations_left -= 1
            try:
                ev.exec(body)
            except Continue:
                pass
            except Break:
                return
            if nxt is not None:
                ev.eval(nxt)
    # the condition is not known: the body must not contain operations
    ev.mem.state = base
    ev.mem.frames[-1].scopes = scopes
    if summarise(ev, node, body, cond, nxt, None, do_first):
        return
    s0 = ev.mem.state.clone()
    ev.mem.state.uncertain_break = None
    if cond is not None and not do_first:
        ev.eval(cond)
    try:
        ev.exec(body)
        if nxt is not None:
            ev.eval(nxt)
    except (Break, Continue):
        pass
    if (len(ev.mem.state.ops) > len(s0.ops) or set(ev.mem.state.buffers) != set(s0.buffers)
            or ev.mem.state.kobjs != s0.kobjs):
        raise ev.ctx.error("launches or buffer operations in a loop whose trip count "
                           "polyfuse cannot determine (not a counted for loop with affine "
                           f"bounds){_open_condition(open_src)}", node, UnsupportedError)
    for k in changed_slots(s0, ev.mem.state):
        slot = s0.slots[k]
        ev.mem.state.slots[k] = dataclasses.replace(
            slot, value=havoc_diff(slot.value, ev.mem.state.slots[k].value))
    ev.mem.state.uncertain_break = s0.uncertain_break


def _open_condition(src: Optional[Source]) -> str:
    """What a loop's undecided condition depends on: a value the device computes each
    iteration (a frontier flag read back: the trip count is the data's), or one ``--param``
    can fix."""
    if src is None:
        return ""
    if src.what.startswith("read back from the device"):
        return f": its condition depends on {src.describe()}, data the loop's launches compute"
    return f": its condition depends on {src.describe()}{param_hint(src)}"


def summarise(ev: CEvaluator, loop: c_ast.Node, body: c_ast.Node, cond: Optional[c_ast.Node],
              nxt: Optional[c_ast.Node], sid: Optional[int], do_first: bool) -> bool:
    """A loop that makes no OpenCL call, summarised instead of interpreted iteration by
    iteration: what it may write becomes unknown (until nothing more changes).  False,
    with the state untouched, when the body does make operations."""
    base = ev.mem.state.clone()
    scopes = [dict(s) for s in ev.mem.frames[-1].scopes]
    ev.ctx.summarising += 1
    try:
        done = summary_passes(ev, base, scopes, body, cond, nxt, sid, do_first)
    finally:
        ev.ctx.summarising -= 1
    if not done:
        return False
    ev.mem.state.uncertain_break = base.uncertain_break
    src = ev.source("computed by a loop polyfuse summarises", loop)
    for k in changed_slots(base, ev.mem.state):
        slot = ev.mem.state.slots[k]
        if slot.ctype.kind in ("int", "float") and isinstance(slot.value, Unknown) and k != sid:
            # a count or total the loop computes: named, so that --param can bind it
            ev.mem.state.slots[k] = dataclasses.replace(
                slot, value=ev.params.coerce(Runtime(src), slot.ctype, slot.name))
    return True


def summary_passes(ev: CEvaluator, base: State, scopes: list, body: c_ast.Node,
                   cond: Optional[c_ast.Node], nxt: Optional[c_ast.Node], sid: Optional[int],
                   do_first: bool) -> bool:
    for _ in range(4):
        s0 = ev.mem.state.clone()
        if sid is not None:
            ev.mem.write(Ref(sid), UNK)
        try:
            if cond is not None and not do_first:
                ev.eval(cond)
            ev.exec(body)
            if nxt is not None:
                ev.eval(nxt)
        except (Break, Continue):
            pass
        except PolyfuseError:  # an operation that needs the iterations: not summarisable
            ev.mem.state = base
            return False
        finally:
            ev.mem.frames[-1].scopes = [dict(sc) for sc in scopes]
        if (len(ev.mem.state.ops) != len(base.ops) or set(ev.mem.state.buffers) != set(base.buffers)
                or ev.mem.state.kobjs != base.kobjs):
            ev.mem.state = base
            return False
        changed = changed_slots(s0, ev.mem.state)
        for k in changed:
            ev.mem.state.slots[k] = dataclasses.replace(
                s0.slots[k], value=havoc_diff(s0.slots[k].value, ev.mem.state.slots[k].value))
        if not changed:
            break
    return True



#: the statement kinds this module executes, by pycparser class name
STATEMENTS = {"For": for_, "While": while_, "DoWhile": do_while}
