"""The C evaluator of the host front-end: statements, expressions and calls.

:class:`CEvaluator` is composed of the parts it uses, each owning its state: the position and
diagnostics (:class:`~.context.Context`), host parameters (:class:`~.params.Params`), memory
(:class:`~.memory.Memory`), types (:class:`~.typetable.TypeTable`), the programs and kernels
(:class:`~.sources.KernelSources`), the OpenCL objects (:class:`~.opencl_api.OpenCLObjects`)
and the C library's state (:class:`~.libc.LibcState`).  The node kinds are functions in
:mod:`.statements`, :mod:`.loops` and :mod:`.expressions`; a call goes to a function of the
program (inlined), the C++ wrapper model (:mod:`.clhpp`), or a handler of the OpenCL API table
(:data:`.opencl_api.HANDLERS`) or the C library table (:data:`.libc.LIBC`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.core.program import BufferRange, HostOp, Operation, UnsupportedError
from polyfuse.frontend.host import clhpp, expressions, loops, packs, recursion, statements
from polyfuse.frontend.host.context import Context
from polyfuse.frontend.host.libc import LIBC, STD_STRING, LibcState, std_string
from polyfuse.frontend.host.memory import Frame, Memory, Slot, State
from polyfuse.frontend.host.opencl_api import HANDLERS, OpenCLObjects
from polyfuse.frontend.host.params import Params
from polyfuse.frontend.host.signals import Break, Continue, Exit, NeedUnroll, Return
from polyfuse.frontend.host.sources import KernelSources
from polyfuse.frontend.host.statements import join_all
from polyfuse.frontend.host.symbolic import free_syms
from polyfuse.frontend.host.typetable import TypeTable
from polyfuse.frontend.host.values import (
    UNK,
    UNK_TYPE,
    Arr,
    BufRef,
    Closure,
    CType,
    Num,
    Poison,
    Rec,
    Ref,
    Source,
    Str,
    Value,
    param_hint,
    relation_of,
    src_of,
)

_MAX_CALL_DEPTH = 48
_MAX_NEW_CONSTRUCTED = 64  # objects of one new[] whose constructor is followed
_STATEMENTS = {**statements.STATEMENTS, **loops.STATEMENTS}
_EXPRESSIONS = dict(expressions.EXPRESSIONS)  # and "FuncCall", below the class


class CEvaluator:
    """Interprets C: each statement changes :attr:`mem`, each expression has a value."""

    def __init__(self, ctx: Context, params: Params, mem: Memory, sources: KernelSources,
                 libc: LibcState) -> None:
        self.ctx = ctx
        self.params = params
        self.mem = mem
        self.sources = sources
        self.libc = libc
        self.types = TypeTable(ctx, mem, self.eval)
        self.cl = OpenCLObjects()
        self.funcs: dict[str, c_ast.FuncDef] = {}
        self.overloads: dict[str, list[c_ast.FuncDef]] = {}  # C++ overloads share a name
        self.guard_names: dict[int, str] = {}  # if statement -> its guard loop's iterator
        self.break_src: dict[int, Source] = {}  # if statement -> the data its break tests
        self.nest_depth = 0  # loop statements being interpreted, nested
        self.branch_hint = ""  # the --param that decides the condition whose paths are merged
        self.undecided = 0  # conditions explored on both sides so far
        self.iterations_left = 0  # of the current loop nest's budget
        self.reach_cache: dict[str, tuple[bool, frozenset[str]]] = {}  # see .recursion
        #: memory slot -> the class of the objects `new` made there and its bases
        self.classes: dict[int, tuple[str, ...]] = {}
        #: memory slot -> the slots of its class template's parameters (``__sizeof_T``)
        self.class_args: dict[int, dict[str, int]] = {}
        #: a class template's static data member per specialization (``C__x__spec_4``), made
        #: from its generic definition on first use -> its slot and that slot as made
        self.statics: dict[str, tuple[int, Slot]] = {}

    def eval_named(self, node: c_ast.Node, hint: str) -> Value:
        """The value of ``node``, computed to be stored in the variable ``hint``."""
        self.ctx.name_hint = hint
        try:
            return self.eval(node)
        finally:
            self.ctx.name_hint = None

    def exec(self, node: Optional[c_ast.Node]) -> None:
        """Execute a statement (an expression statement is evaluated)."""
        if node is None:
            return
        self.ctx.node = node
        run = _STATEMENTS.get(type(node).__name__)
        if run is not None:
            run(self, node)
        else:
            self.eval(node)

    def eval(self, node: Optional[c_ast.Node]) -> Value:
        """The value of an expression (unknown for a construct polyfuse does not model)."""
        if node is None:
            return UNK
        run = _EXPRESSIONS.get(type(node).__name__)
        if run is None:
            return UNK
        return run(self, node)

    def call(self, node: c_ast.FuncCall) -> Value:
        """A call: to a function of the program (inlined), ``assert``, the C++ wrapper, an
        OpenCL or C library handler, else an unknown function."""
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        hint, self.ctx.name_hint = self.ctx.name_hint, None
        argn = list(node.args.exprs) if node.args is not None else []
        if name == "__polyfuse_new":
            return self.new_object(argn, hint or "heap", node)
        if name == "__polyfuse_dispatch":
            return self.dispatch(argn, node)
        if name == "__polyfuse_object":  # a variable of a class of the program: its class
            obj = self.eval(argn[0])
            if isinstance(obj, Ref) and not obj.path:
                self.classes[obj.slot] = tuple(argn[-1].value.strip('"').split())
                self.record_class_args(obj.slot, argn)
            return UNK
        if name == "__polyfuse_static":
            return self.static_member(argn, node)
        if name == "assert":
            v = self.eval(argn[0]) if argn else UNK
            rel = relation_of(v)
            if rel is not None:
                self.mem.state.facts.append(rel)
            return UNK
        if name in packs.CALLS:
            return packs.call(self, name, argn, node)
        args = packs.eval_args(self, argn)
        self.ctx.node = node
        if name is None:
            return self.unknown_call("(function pointer)", args, node)
        if name == "__polyfuse_lambda":
            return self.make_closure(argn[0])
        if name == "__polyfuse_overload" and args:  # a call in a template, by name
            name, args = argn[0].value.strip('"'), args[1:]
            targs: list[Value] = []
            if isinstance(argn[-1], c_ast.FuncCall) and isinstance(argn[-1].name, c_ast.ID) \
                    and argn[-1].name.name == "__polyfuse_template_args":
                # `g<T, true>(x)`: the template's hidden parameters follow its own
                targs = [self.eval(a) for a in argn[-1].args.exprs]
                args, argn = args[:-1], argn[:-1]
            variadic = packs.overload(self, name, args, targs)
            if variadic is not None:
                return self.call_function(variadic[0], variadic[1], node)
            spec = f"{name}__spec_" + "_".join(
                str(v.e) if isinstance(v, Num) and v.e.is_Integer else "?" for v in targs)
            if targs and spec in self.funcs:  # the explicit specialization for these types
                return self.call_function(self.funcs[spec], args, node)
            fd = next((self.funcs[n] for n in (name, f"{name}__{len(args)}")
                       if n in self.funcs and _arity(self.funcs[n]) == len(args)), None)
            if fd is None:  # a template whose type arguments the call deduces
                fd = _template_taking(self.funcs.get(name), len(args), len(targs))
                if fd is not None:
                    hidden = _arity(fd) - len(args)
                    return self.call_function(fd, args + (targs + [UNK] * hidden)[:hidden],
                                              node)
            if fd is not None:
                return self.call_function(fd, args, node)
            # not the program's: the library's or OpenCL's function of that name (a map
            # call in a member template: clEnqueueUnmapMemObject(q, buf, ptr, ...))
            node = c_ast.FuncCall(c_ast.ID(name), c_ast.ExprList(argn[1:]), coord=node.coord)
            self.ctx.node = node
        if name == "__polyfuse_refuse":  # a construct the lowering could not model, run here
            why = argn[0].value[1:-1] if argn and isinstance(argn[0], c_ast.Constant) else ""
            raise self.ctx.error(f"unsupported host construct: {why}", node, UnsupportedError)
        if self.mem.lookup(name) is not None:  # a variable shadows a function of that name
            closure = self.closure_in(name)
            if closure is None:
                # `kernel(cl::EnqueueArgs(...), a, b)` in a template, `kernel` a functor
                called = clhpp.functor_call(self, node, self.eval(node.name), args)
                return self.unknown_call(name, args, node) if called is None else called
            return self.call_function(self.funcs[closure.func], args, node,
                                      dict(closure.scope))
        if name in self.funcs and name != "main":
            fd = self.function(name, len(args))
            return self.call_function(fd, args, node, self.method_scope(fd, args))
        if name in STD_STRING:
            return std_string(self, name, args)
        if clhpp.handles(name):
            self.ctx.name_hint = hint
            try:
                return clhpp.call(self, name, node, args)
            finally:
                self.ctx.name_hint = None
        handler = HANDLERS.get(name) or LIBC.get(name)
        if handler is None and name.endswith("__operator=") and args and \
                isinstance(args[0], Ref):
            # a class's implicit copy assignment (``m[k] = opt``): the value is copied
            src = args[1] if len(args) > 1 else UNK
            self.mem.write(args[0], self.mem.read(src) if isinstance(src, Ref) else src)
            return args[0]
        if handler is None:
            return self.unknown_call(name, args, node)
        self.ctx.name_hint = hint
        try:
            return handler(self, node, args)
        finally:
            self.ctx.name_hint = None

    def function(self, name: str, nargs: int) -> c_ast.FuncDef:
        """The program's function ``name`` a call with ``nargs`` arguments means: among C++
        overloads (lowered to one name), the one taking that many."""
        fds = self.overloads.get(name, ())
        if len(fds) > 1:
            fit = [fd for fd in fds if _arity(fd) == nargs]
            if fit:
                return fit[-1]
        return self.funcs[name]

    def make_closure(self, name: c_ast.Node) -> Value:
        """A lambda made here: it sees the variables in scope (by reference)."""
        func = name.value.strip('"') if isinstance(name, c_ast.Constant) else ""
        if func not in self.funcs:
            return UNK
        seen: dict[str, int] = {}
        for scope in self.mem.frames[-1].scopes:
            seen.update(scope)
        return Closure(func, tuple(sorted(seen.items())))

    def closure_in(self, name: str) -> Optional[Closure]:
        """The lambda a variable ``name`` holds (also through a reference), if it holds one."""
        sid = self.mem.lookup(name)
        if sid is None:
            return None
        v = self.mem.read(Ref(sid))
        for _ in range(3):
            if not isinstance(v, Ref):
                break
            v = self.mem.read(v)
        return v if isinstance(v, Closure) and v.func in self.funcs else None

    def call_function(self, fd: c_ast.FuncDef, args: list[Value], node: c_ast.Node,
                      seen: Optional[dict[str, int]] = None) -> Value:
        """Inline a call of a function of the program; its (joined) return value.  ``seen``:
        the variables a lambda sees where it was made.  A recursive call of a function that
        makes no OpenCL call is summarised (.recursion)."""
        if recursion.is_summarised(self, fd):
            return recursion.summarise_call(self, fd, args, node)
        if len(self.mem.frames) > _MAX_CALL_DEPTH:
            raise self.ctx.error(f"call depth exceeds {_MAX_CALL_DEPTH} in '{fd.decl.name}': "
                                 "polyfuse inlines the host's functions and cannot follow "
                                 "recursion this deep through OpenCL calls", node,
                                 UnsupportedError)
        frame = Frame(fd.decl.name, [{}] if seen is None else [seen, {}], func=id(fd))
        params = fd.decl.type.args.params if fd.decl.type.args is not None else []
        decls = [p for p in params if isinstance(p, c_ast.Decl) and p.name]
        entry_ops = len(self.mem.state.ops)
        self.mem.frames.append(frame)
        try:
            for i, p in enumerate(decls):
                ctype = self.types.of(p.type)
                if ctype.kind == "array":
                    ctype = CType("ptr", 8, elem=ctype.elem)
                self.mem.declare(p.name, ctype, args[i] if i < len(args) else UNK)
            self.ctx.node = fd.body
            try:
                self.exec(fd.body)
                result: Any = UNK
            except Return as r:
                result = r.value
            except (Break, Continue):
                raise self.ctx.error("break or continue outside a loop", fd) from None
            except Exit:
                if not frame.cond_returns:
                    raise
                # a search that returns what it finds and ends the program when it finds
                # nothing: the paths that returned are the ones taken
                self.mem.state = self.returned_state(entry_ops, frame.cond_states, fd)
                return join_all(self, frame.cond_returns, "result")
            if frame.cond_returns:
                result = join_all(self, frame.cond_returns + [result], "result")
            return result
        finally:
            self.mem.frames.pop()

    def new_object(self, argn: list[c_ast.Node], name: str, node: c_ast.Node) -> Value:
        """``new T(args)`` / ``new T[n]`` of a class of the program (lowered by the C++
        front-end as ``__polyfuse_new((T *) 0, n[, T__T(__polyfuse_this, args)])``): fresh
        memory holding ``n`` objects, each default-initialised (``std::string`` members empty)
        and then constructed; past :data:`_MAX_NEW_CONSTRUCTED` objects, or ``n`` unknown,
        a constructor's effects are not followed and the objects are unknown."""
        elem = self.types.of(argn[0].to_type).elem or UNK_TYPE
        n = self.eval(argn[1])
        count = int(n.e) if isinstance(n, Num) and n.e.is_Integer and n.e >= 0 else None
        chain = argn[-1].value.strip('"').split() if isinstance(argn[-1], c_ast.Constant) \
            and argn[-1].type == "string" else []
        ctor = argn[2] if len(argn) > 2 and (argn[2] is not argn[-1] or not chain) and \
            not _named_call(argn[2], "__polyfuse_class_args") else None
        follow = count is not None and count <= _MAX_NEW_CONSTRUCTED
        value = Arr(count, (), self.types.default(elem, False) if follow or ctor is None
                    else UNK)
        sid = self.mem.new_slot(name, CType("array", elem.size * (count or 0), elem=elem,
                                            length=count), value)
        if chain:
            self.classes[sid] = tuple(chain)
        self.record_class_args(sid, argn)
        if ctor is not None and follow:
            for k in range(count):
                self.mem.frames[-1].scopes.append({})
                try:
                    self.mem.declare("__polyfuse_this", CType("ptr", 8, elem=elem),
                                     Ref(sid, (k,)))
                    self.eval(ctor)
                finally:
                    self.mem.frames[-1].scopes.pop()
        return Ref(sid)

    def record_class_args(self, sid: int, argn: list[c_ast.Node]) -> None:
        """Keep what the class template parameters of the object in slot ``sid`` are
        (``__polyfuse_class_args("__sizeof_T", size, ...)`` among ``argn``): its methods,
        lowered once for the template, read them."""
        spec = next((a for a in argn if _named_call(a, "__polyfuse_class_args")), None)
        if spec is None:
            return
        items = list(spec.args.exprs)
        scope = {}
        for name, value in zip(items[::2], items[1::2]):
            pname = name.value.strip('"')
            scope[pname] = self.mem.new_slot(pname, CType("int", 8), self.eval(value))
        self.class_args[sid] = scope

    def static_member(self, argn: list[c_ast.Node], node: c_ast.Node) -> Value:
        """The static data member ``C::x`` of the specialization of the class template ``C``
        whose type arguments have the sizes ``__polyfuse_class_args`` gives (lowered as
        ``__polyfuse_static("C__x", __polyfuse_class_args("__sizeof_T", size, ...))``): each
        specialization has its own object, the one its explicit definition defines
        (``C__x__spec_4``), else one made from the generic definition (``C__x``) when first
        used."""
        name = argn[0].value.strip('"')
        items = list(argn[1].args.exprs)
        sizes = [self.eval(v) for v in items[1::2]]
        what = name.replace("__", "::")
        if not all(isinstance(v, Num) and v.e.is_Integer for v in sizes):
            raise self.ctx.error(
                f"unsupported host construct: the static data member '{what}' of a class "
                "template is used where its template arguments are not known (in a static "
                "method, or on an object polyfuse did not see made)", node, UnsupportedError)
        key = f"{name}__spec_" + "_".join(str(int(v.e)) for v in sizes)
        sid = self.mem.globals.get(key)
        if sid is not None:
            return Ref(sid)
        made = self.statics.get(key)
        if made is None:
            generic = self.mem.globals.get(name)
            initial = self.mem.state.slots.get(generic) if generic is not None else None
            if initial is None:
                raise self.ctx.error(
                    f"the static data member '{what}' has no definition in the host files "
                    "given (name the file that defines it with --host)", node,
                    UnsupportedError)
            sid = self.mem.new_slot(key, initial.ctype, initial.value)
            made = self.statics[key] = (sid, self.mem.state.slots[sid])
        sid, slot = made
        if sid not in self.mem.state.slots:  # made on a path this state did not take
            self.mem.state.slots[sid] = slot
        return Ref(sid)

    def method_scope(self, fd: c_ast.FuncDef, args: list[Value]) -> Optional[dict[str, int]]:
        """The class template parameters a method sees, from the object it runs on."""
        if not args or not isinstance(args[0], Ref) or args[0].slot not in self.class_args or \
                not all(not isinstance(i, str) for i in args[0].path):
            return None
        params = fd.decl.type.args.params if fd.decl.type.args is not None else []
        if not params or getattr(params[0], "name", None) != "this":
            return None
        return dict(self.class_args[args[0].slot])

    def dispatch(self, argn: list[c_ast.Node], node: c_ast.FuncCall) -> Value:
        """``obj->method(args)`` of a virtual method, or of a class template's method in a
        template (lowered as ``__polyfuse_dispatch("method", "C B", "why", pure, obj,
        args...)`` with the static class ``C`` and its bases): the first definition along the
        chain of the object's dynamic class, known where ``new`` or a declaration made it;
        else along the static chain when the method is not pure and no class outside it
        defines the method (then every object runs that one).  Otherwise the call is refused
        here, saying ``why``."""
        method = argn[0].value.strip('"')
        static = argn[1].value.strip('"').split()
        why = argn[2].value[1:-1]
        pure = argn[3].value == "1"
        obj = self.eval(argn[4])
        args = [obj] + packs.eval_args(self, argn[5:])
        self.ctx.node = node
        # the object itself or an element of the array `new` made (a member is another object)
        dynamic = self.classes.get(obj.slot) if isinstance(obj, Ref) and all(
            not isinstance(i, str) for i in obj.path) else None
        defs = [f"{c}__{method}" for c in (dynamic or static) if f"{c}__{method}" in self.funcs]
        if dynamic is None and (pure or not defs or any(
                n.endswith(f"__{method}") and n.split("__")[0] not in static
                for n in self.funcs)):
            raise self.ctx.error(f"unsupported host construct: {why} (the object was not "
                                 "made by a `new` or declaration polyfuse followed)", node,
                                 UnsupportedError)
        if not defs:
            return self.unknown_call(method, args, node)
        fd = self.function(defs[0], len(args))
        return self.call_function(fd, args, node, self.method_scope(fd, args))

    def returned_state(self, entry_ops: int, states: list[State], fd: c_ast.FuncDef) -> State:
        """The state after a function whose only paths that go on return early: the
        merge of those paths (all descend from the call's state, which had ``entry_ops``
        operations), which must agree on the operations they made."""
        if len({tuple(st.ops[entry_ops:]) for st in states}) > 1:
            raise self.ctx.error(
                f"'{fd.decl.name}' returns on paths that make different kernel launches or "
                "buffer operations, under conditions polyfuse cannot decide", fd,
                UnsupportedError)
        out = statements.merge(self, states[0], states, descend=False)
        out.ops = list(states[0].ops)
        out.facts = [f for f in states[0].facts if all(f in st.facts for st in states)]
        return out

    def source(self, what: str, node: c_ast.Node) -> Source:
        """Where a value computed from the program's data comes from (``node``'s line)."""
        loc = self.ctx.loc(node)
        return Source(what, f"{loc.file}:{loc.line}" if loc else self.ctx.filename)

    def unknown_call(self, name: str, args: list[Value], node: c_ast.Node) -> Value:
        """A function polyfuse does not know: it reads and writes every buffer it receives
        and what it may write through pointers becomes a run-time value."""
        for a in args:  # a kernel file opened by a library call (std::ifstream, open)
            if isinstance(a, Str) and a.s.endswith((".cl", ".ocl", ".clh")):
                found = self.sources.find_file(a.s)
                self.sources.open_file(found or a.s)
        bufs = []
        for a in args:
            bufs += self.buffers_in(a, 0)
        bufs = list(dict.fromkeys(bufs))
        if bufs:
            ranges = tuple(BufferRange(b) for b in bufs)
            self.record(HostOp(id=0, kind="unknown", reads=ranges, writes=ranges, name=name), node)
        # host variables it may write through pointers hold values known only at run time
        self.mem.forget_through([a for a in args if isinstance(a, Ref)])
        return UNK

    def buffers_in(self, v: Value, depth: int) -> list[str]:
        """The buffers a value holds or points to (a few levels deep)."""
        if isinstance(v, BufRef):
            return [v.name]
        if depth > 3:
            return []
        if isinstance(v, Ref):
            return self.buffers_in(self.mem.read(Ref(v.slot, v.path)), depth + 1)
        if isinstance(v, Arr):
            out = []
            for _, e in v.elems:
                out += self.buffers_in(e, depth + 1)
            return out
        if isinstance(v, Rec):
            out = []
            for _, e in v.fields:
                out += self.buffers_in(e, depth + 1)
            return out
        return []

    def int_value(self, v: Value, what: str, node: c_ast.Node, *, required: bool = True) -> Any:
        """A sympy integer expression for ``v``; an error (or None) when it is not known."""
        if isinstance(v, Num) and not v.flt:
            return v.e
        if isinstance(v, Num) and v.e.is_number:
            return sympy.Integer(int(v.e))
        if not required:
            return None
        if isinstance(v, Poison):
            raise self.ctx.error(f"{what} {v.reason}", node, UnsupportedError)
        src = src_of(v)
        if src is not None and src.loop_index and self.ctx.loop_syms:
            raise NeedUnroll(f"{what} depends on {src.what}")
        if src is not None:
            raise self.ctx.error(f"{what} depends on a value the program computes from its data "
                                 f"({src.describe()}){param_hint(src)}", node, UnsupportedError)
        hint = "" if self.libc.argv is not None else \
            " (if it comes from the command line, give it with --args \"...\")"
        raise self.ctx.error(f"{what} is not an integer polyfuse can determine from the host code"
                             f"{hint}", node, UnsupportedError)

    def concrete(self, v: Value, what: str, node: c_ast.Node) -> int:
        """``v`` as a Python int; an error (or an unroll request) when it is symbolic."""
        e = self.int_value(v, what, node)
        if e.is_Integer:
            return int(e)
        if free_syms(e) & self.ctx.loop_syms:
            raise NeedUnroll(f"{what} depends on a host loop iterator")
        raise self.ctx.error(f"{what} must be a constant, got {e}", node, UnsupportedError)

    def record(self, op: Operation, node: c_ast.Node) -> None:
        """Record an operation at ``node``, inside the host loops around it."""
        op = dataclasses.replace(op, loops=tuple(self.ctx.loops), loc=self.ctx.loc(node))
        self.mem.state.ops.append(op)


# a call is evaluated by the evaluator itself (no wrapper: the Python stack per C call level
# stays what it was, so deep hosts reach the recursion limit at the same place)
_EXPRESSIONS["FuncCall"] = CEvaluator.call


def _named_call(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and \
        node.name.name == name


def _template_taking(fd: Optional[c_ast.FuncDef], nargs: int, ntargs: int
                     ) -> Optional[c_ast.FuncDef]:
    """``fd`` if it is a function template's lowered body that takes ``nargs`` arguments and at
    least ``ntargs`` hidden template parameters after them (C++ deduces the rest)."""
    if fd is None:
        return None
    params = fd.decl.type.args.params if fd.decl.type.args is not None else []
    named = [p for p in params if isinstance(p, c_ast.Decl) and p.name]
    hidden = named[nargs:]
    if len(hidden) < ntargs or packs.real_arity(fd) != nargs:
        return None
    return fd


def _arity(fd: c_ast.FuncDef) -> int:
    """The number of parameters of a function of the program."""
    params = fd.decl.type.args.params if fd.decl.type.args is not None else []
    return len([p for p in params if isinstance(p, c_ast.Decl) and p.name])
