"""C statements: blocks, declarations, jumps, and conditions whose outcome polyfuse does not
know (both sides explored, error paths dropped, the survivors merged)."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.c import syntax
from polyfuse.core.program import HostLoop, Launch, UnsupportedError
from polyfuse.frontend.host.memory import State, written_slots
from polyfuse.frontend.host.signals import (
    Break,
    Continue,
    Exit,
    Goto,
    NeedUnroll,
    Return,
    Signal,
)
from polyfuse.frontend.host.symbolic import affine_bounds, free_syms
from polyfuse.frontend.host.values import (
    INT,
    UNK,
    Arr,
    Cond,
    Num,
    Poison,
    Rec,
    Runtime,
    Source,
    Str,
    Unknown,
    relation_of,
    src_of,
    truth_of,
)

if TYPE_CHECKING:
    from polyfuse.frontend.host.evaluator import CEvaluator

from polyfuse.frontend.host.expressions import init_list


def compound(ev: CEvaluator, node: c_ast.Compound) -> None:
    ev.mem.frames[-1].scopes.append({})
    items = node.block_items or []
    try:
        i = 0
        while i < len(items):
            try:
                ev.exec(items[i])
                i += 1
            except Goto as g:  # a forward jump to a label of this block
                later = [j for j in range(i + 1, len(items))
                         if isinstance(items[j], c_ast.Label) and items[j].name == g.label]
                if not later:
                    raise
                i = later[0]
    finally:
        ev.mem.frames[-1].scopes.pop()


def decl(ev: CEvaluator, node: c_ast.Decl) -> None:
    if isinstance(node.type, c_ast.FuncDecl):
        return
    ev.types.collect_tags(node.type)
    exec_decl(ev, node)


def decl_list(ev: CEvaluator, node: c_ast.DeclList) -> None:
    for d in node.decls:
        decl(ev, d)


def typedef(ev: CEvaluator, node: c_ast.Typedef) -> None:
    ev.types.typedefs[node.name] = node.type
    ev.types.collect_tags(node.type)


def nothing(ev: CEvaluator, node: c_ast.Node) -> None:
    pass


def label(ev: CEvaluator, node: c_ast.Label) -> None:
    ev.exec(node.stmt)


def goto(ev: CEvaluator, node: c_ast.Goto) -> None:
    raise Goto(node.name)


def break_(ev: CEvaluator, node: c_ast.Node) -> None:
    raise Break()


def continue_(ev: CEvaluator, node: c_ast.Node) -> None:
    raise Continue()


def return_(ev: CEvaluator, node: c_ast.Return) -> None:
    value = ev.eval(node.expr) if node.expr is not None else UNK
    raise Return(value)


def exec_decl(ev: CEvaluator, node: c_ast.Decl) -> None:
    if not node.name:
        return
    ctype = ev.types.of(node.type)
    if "extern" in (node.storage or []):
        ev.mem.declare(node.name, ctype, ev.types.default(ctype, False))
        return
    if node.init is None:
        zero = ev.mem.frames[-1].name == "<globals>" or "static" in (node.storage or [])
        ev.mem.declare(node.name, ctype, ev.types.default(ctype, zero))
        return
    if isinstance(node.init, c_ast.InitList):
        if ctype.kind == "array" and ctype.length is None:
            n = len(node.init.exprs)
            ctype = dataclasses.replace(ctype, length=n, size=(ctype.elem or INT).size * n)
        value = init_list(ev, node.init, ctype, node.name)
    else:
        ev.ctx.name_hint = node.name
        try:
            value = ev.eval(node.init)
        finally:
            ev.ctx.name_hint = None
        if ctype.kind == "array" and isinstance(value, Str):
            # char name[21] = "...": a buffer holding that text (strcpy copies it)
            sid = ev.mem.declare(node.name, ctype, Arr(len(value.s) + 1, (), UNK))
            ev.mem.set_text(sid, value.s)
            return
    ev.mem.declare(node.name, ctype, value)


def if_(ev: CEvaluator, node: c_ast.If) -> None:
    cond = ev.eval(node.cond)
    truth = truth_of(cond)
    if truth is True:
        ev.exec(node.iftrue)
    elif truth is False:
        ev.exec(node.iffalse)
    else:
        branches(ev, node, [node.iftrue, node.iffalse], relation_of(cond),
                 src=condition_source(ev, cond))


def condition_source(ev: CEvaluator, cond: Any) -> Optional[Source]:
    """The data an undecided condition tests: an unknown's source, or where a parameter its
    relation compares was read (a count read back from the device in an unrolled loop: a
    parameter per iteration, so the source is named by its line, not by one iteration's)."""
    src = src_of(cond)
    rel = relation_of(cond)
    if src is None and rel is not None:
        src = next((dataclasses.replace(ev.params.origins[str(x)], name="")
                    for x in sorted(free_syms(rel), key=str) if str(x) in ev.params.origins),
                   None)
    return src


def branches(ev: CEvaluator, node: c_ast.Node, bodies: list, rel: Any, *,
             switch: bool = False, src: Optional[Source] = None) -> None:
    """Explore bodies whose choice is not known; keep the non-error paths and merge them.

    In a ``switch`` (``switch=True``) a ``break`` ends its case normally."""
    ev.undecided += 1
    base = ev.mem.state
    results = []
    left: list[State] = []
    signals: list[Signal] = []
    facts = []
    for k, body in enumerate(bodies):
        ev.mem.state = base.clone()
        scopes = [dict(s) for s in ev.mem.frames[-1].scopes]
        sig: Optional[Signal] = None
        try:
            if isinstance(body, list):
                for item in body:
                    ev.exec(item)
            else:
                ev.exec(body)
        except (Exit, Goto, Return, Break, Continue) as s:
            sig = s
        finally:
            ev.mem.frames[-1].scopes = scopes
        if sig is None or (switch and isinstance(sig, Break)):
            results.append((k, ev.mem.state))
            continue
        signals.append(sig)
        ends = isinstance(sig, (Exit, Goto)) or isinstance(sig, Return) and \
            ev.mem.frames[-1].name == "main"  # an error path, assumed not taken
        if isinstance(sig, Return) and ev.mem.frames[-1].name != "main":
            ev.mem.frames[-1].cond_returns.append(sig.value)
            ev.mem.frames[-1].cond_states.append(ev.mem.state)
        if isinstance(sig, (Break, Continue)):
            base.uncertain_break = node
            if src is not None:
                ev.break_src[id(node)] = src
        if not ends and leaves_values_only(ev, base, ev.mem.state, node, rel):
            left.append(ev.mem.state)
        if not ends:
            continue
        if rel is not None and len(bodies) == 2:
            facts.append(sympy.Not(rel) if k == 0 else rel)
        elif isinstance(sig, (Exit, Return)) and ev.mem.frames[-1].name == "main":
            # main's own early exits (helpers' I/O error checks are routine)
            ev.ctx.warn("assuming the path that ends the program here is not taken: its "
                        "condition depends on a value polyfuse does not know", node)
    ev.mem.state = base
    if not results:
        reraise(ev, signals)
    if left:
        # what a path that leaves the loop or helper (a search loop's ``found = 1; break;``)
        # stored may hold afterwards: joined into a path that goes on (over-approximated)
        k, st = results[-1]
        results[-1] = (k, merge(ev, base, [st, *left]))
    for k, st in results:
        new_ops = st.ops[len(base.ops):]
        if new_ops and rel is not None and free_syms(rel) & ev.ctx.loop_syms:
            guard = guard_loop(ev, node, rel if k == 0 else sympy.Not(rel))
            if guard is not None:
                depth = len(ev.ctx.loops)
                st.ops[len(base.ops):] = [dataclasses.replace(
                    op, loops=op.loops[:depth] + (guard,) + op.loops[depth:])
                                          for op in new_ops]
                continue
        for op in new_ops:
            if isinstance(op, Launch) or op.kind in ("write", "copy", "unknown"):
                if rel is not None and free_syms(rel) & ev.ctx.loop_syms:
                    raise NeedUnroll("operation under a condition on a host loop iterator "
                                     "that is not a conjunction of affine bounds")
                what = "launch" if isinstance(op, Launch) else f"{op.name or op.kind}"
                raise ev.ctx.error(
                    f"{what} under data-dependent host condition (line "
                    f"{op.loc.line if op.loc else '?'}): polyfuse cannot model a kernel "
                    "launch or buffer update that may or may not run", node,
                    UnsupportedError)
    saved, ev.branch_hint = ev.branch_hint, ev.params.hint(rel) if rel is not None else ""
    try:
        ev.mem.state = merge(ev, base, [st for _, st in results])
    finally:
        ev.branch_hint = saved
    loc = ev.ctx.loc(node)
    for k in set().union(*(st.texts for _, st in results)) - set(ev.mem.state.texts):
        ev.mem.state.text_why.setdefault(k, "written differently on the paths of the "
                                         f"condition at {loc.file}:{loc.line}" if loc else
                                         "written differently on two paths")
    ev.mem.state.facts.extend(facts)
    if base.uncertain_break is not None:
        ev.mem.state.uncertain_break = base.uncertain_break


def leaves_values_only(ev: CEvaluator, base: State, st: State, node: c_ast.Node,
                       rel: Any) -> bool:
    """Whether a path that leaves early (``break``, ``continue``, a helper's ``return``) may
    be joined into the paths that go on: it changed host values and made reads at most.  A
    launch or buffer update on it is refused (it may or may not run), unless unrolling the
    host loop whose iterator the condition tests decides it."""
    for op in st.ops[len(base.ops):]:
        if isinstance(op, Launch) or op.kind in ("write", "copy", "unknown"):
            if rel is not None and free_syms(rel) & ev.ctx.loop_syms:
                raise NeedUnroll("operation on a path that leaves early under a condition on "
                                 "a host loop iterator")
            what = "launch" if isinstance(op, Launch) else f"{op.name or op.kind}"
            raise ev.ctx.error(
                f"{what} on a path that leaves early (break, continue or return) under a "
                f"data-dependent host condition (line {op.loc.line if op.loc else '?'}): "
                "polyfuse cannot model a kernel launch or buffer update that may or may not "
                "run", node, UnsupportedError)
    return st.buffers.keys() == base.buffers.keys() and st.kobjs == base.kobjs


def guard_loop(ev: CEvaluator, node: c_ast.Node, rel: Any) -> Optional[HostLoop]:
    """An affine guard on host loop iterators (``if (k < n - 1)``) as a loop of 0 or 1
    iteration around the operations it guards: their domain honours it exactly and the
    enclosing loop stays symbolic.  None when the guard is not a conjunction of affine
    bounds (``!=``, ``||``)."""
    bounds = affine_bounds(rel)
    if bounds is None:
        return None
    name = ev.guard_names.get(id(node))
    if name is None:
        active = {lp.iterator for lp in ev.ctx.loops}
        loc = ev.ctx.loc(node)
        name = syntax.fresh_name(f"if{loc.line if loc else ''}",
                                 lambda n: ev.params.taken(n) or n in active)
        ev.params.reserve(name)
        ev.guard_names[id(node)] = name
    return HostLoop(iterator=name, lower=sympy.Integer(0),
                    upper=sympy.Min(sympy.Integer(1), *(b + 1 for b in bounds)),
                    loc=ev.ctx.loc(node))


def reraise(ev: CEvaluator, signals: list[Signal]) -> None:
    rets = [s for s in signals if isinstance(s, Return)]
    if rets and ev.mem.frames[-1].name != "main":
        ev.mem.frames[-1].cond_returns.clear()
        ev.mem.frames[-1].cond_states.clear()
        raise Return(join_all(ev, [r.value for r in rets], "result"))
    for kind in (Break, Continue, Return, Goto):
        for s in signals:
            if isinstance(s, kind):
                raise s
    raise Exit()


def merge(ev: CEvaluator, base: State, states: list[State], descend: bool = True) -> State:
    """One state for the paths ``states`` took from ``base``.  ``descend``: each of
    ``states`` descends from ``base`` (else, paths that share an earlier state, every slot
    is compared)."""
    if len(states) == 1:
        return states[0]
    out = base.clone()
    for st in states:
        out.ops.extend(st.ops[len(base.ops):])
        out.buffers.update(st.buffers)
    # only what some path changed: a slot no path wrote is the very object base holds
    sids = set()
    for st in states:
        if descend:
            sids.update(written_slots(base, st))
        else:
            bs = base.slots
            sids.update(k for k, v in st.slots.items() if bs.get(k) is not v)
    base_slots = base.slots
    for sid in sids:
        same = base_slots.get(sid)
        if same is not None and all(st.slots.get(sid) is same for st in states):
            continue  # untouched on every path (out is a clone of base)
        vals = [st.slots[sid] for st in states if sid in st.slots]
        first = vals[0]
        if len(vals) == len(states) and all(v is first or v.value == first.value
                                             for v in vals):
            out.slots[sid] = first
        else:
            out.slots[sid] = dataclasses.replace(
                first, value=join_all(ev, [v.value for v in vals], first.name))
    oids = set().union(*(st.kobjs for st in states))
    for oid in oids:
        ks = [st.kobjs[oid] for st in states if oid in st.kobjs]
        k0 = ks[0]
        binds: dict[int, Any] = {}
        for idx in set().union(*(k.bound() for k in ks)):
            bs = [k.bound().get(idx) for k in ks]
            if all(b == bs[0] for b in bs) and len(ks) == len(states):
                binds[idx] = bs[0]
            else:
                binds[idx] = Poison("set under a data-dependent host condition")
        out.kobjs[oid] = dataclasses.replace(k0, bindings=tuple(sorted(binds.items())))
    out.texts = {k: t for k, t in states[0].texts.items()
                 if all(st.texts.get(k) == t for st in states[1:])}
    out.text_why = {k: w for st in states for k, w in st.text_why.items() if k not in out.texts}
    out.file_pos = {k: p for k, p in states[0].file_pos.items()
                    if all(st.file_pos.get(k) == p for st in states[1:])}
    common = [f for f in states[0].facts[len(base.facts):]
              if all(f in st.facts for st in states)]
    out.facts = list(base.facts) + common
    return out


#: arrays up to this many stored elements are joined element by element
_JOINED_ELEMS = 64


def join_all(ev: CEvaluator, values: list, name: str) -> Any:
    first = values[0]
    if all(v == first for v in values):
        return first
    if all(isinstance(v, (Num, Runtime, Unknown, Cond)) for v in values):
        src = src_of(*values)  # a value computed from data keeps saying where it comes from
        if any(isinstance(v, Num) and v.flt or isinstance(v, Unknown) and v.flt
               for v in values):
            return Unknown(True, src)
        if ev.ctx.varies() or any(isinstance(v, (Unknown, Cond)) for v in values):
            return Unknown(False, src)
        for v in values:  # a parameter already named after this variable wins
            if isinstance(v, Num) and isinstance(v.e, sympy.Symbol) and \
                    re.fullmatch(re.escape(name) + r"(_\d+)?", str(v.e)):
                return v
        joined = ev.params.new(name)
        ev.params.derive(joined.e, [v.e for v in values if isinstance(v, Num)])
        return joined
    if all(isinstance(v, Rec) for v in values):  # an object: field by field
        fields = [dict(v.fields) for v in values]
        keys = list(dict.fromkeys(k for f in fields for k in f))
        return Rec(tuple((k, join_all(ev, [f.get(k, UNK) for f in fields], f"{name}_{k}"))
                         for k in keys))
    if all(isinstance(v, Arr) and v.length == first.length and len(v.elems) <= _JOINED_ELEMS
           for v in values):  # a small table (not the program's data): element by element
        elems = [dict(v.elems) for v in values]
        keys = sorted(set().union(*elems))
        defaults = [v.default for v in values]
        default = defaults[0] if all(d == defaults[0] for d in defaults) else \
            join_all(ev, [UNK if d is None else d for d in defaults], name)
        return Arr(first.length, tuple(
            (k, join_all(ev, [e.get(k, UNK if v.default is None else v.default)
                              for e, v in zip(elems, values)], f"{name}_{k}"))
            for k in keys), default)
    return Poison(f"'{name}' differs between paths of a data-dependent host condition"
                  f"{ev.branch_hint}")


def switch(ev: CEvaluator, node: c_ast.Switch) -> None:
    cond = ev.eval(node.cond)
    items = node.stmt.block_items if isinstance(node.stmt, c_ast.Compound) else [node.stmt]
    items = items or []
    starts = []
    for i, it in enumerate(items):
        if isinstance(it, c_ast.Case):
            starts.append((i, it))
        elif isinstance(it, c_ast.Default):
            starts.append((i, it))

    def body_from(i: int) -> list:
        out = []
        for it in items[i:]:
            if isinstance(it, (c_ast.Case, c_ast.Default)):
                out.extend(it.stmts or [])
            else:
                out.append(it)
        return out

    value = cond.e if isinstance(cond, Num) and cond.e.is_number else None
    try:
        if value is not None:
            for i, it in starts:
                if isinstance(it, c_ast.Case):
                    cv = ev.eval(it.expr)
                    if isinstance(cv, Num) and cv.e == value:
                        exec_list(ev, body_from(i))
                        return
            for i, it in starts:
                if isinstance(it, c_ast.Default):
                    exec_list(ev, body_from(i))
                    return
            return
        bodies = [body_from(i) for i, _ in starts]
        if not any(isinstance(it, c_ast.Default) for _, it in starts):
            bodies.append([])
        branches(ev, node, bodies, None, switch=True)
    except Break:
        pass


def exec_list(ev: CEvaluator, items: list) -> None:
    for it in items:
        ev.exec(it)



#: the statement kinds this module executes, by pycparser class name
STATEMENTS = {
    "Compound": compound, "Decl": decl, "DeclList": decl_list, "Typedef": typedef,
    "EmptyStatement": nothing, "Pragma": nothing, "Label": label, "Goto": goto,
    "Break": break_, "Continue": continue_, "Return": return_, "If": if_, "Switch": switch,
}
