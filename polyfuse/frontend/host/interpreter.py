"""The host interpreter, composed of its parts: it builds them, runs ``main`` and turns the
final state into a :class:`~polyfuse.core.program.Program`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import islpy as isl
import sympy
from pycparser import c_ast

from polyfuse.core.program import (
    DeviceQueries,
    Kernel,
    Launch,
    PolyfuseError,
    Program,
    UnsupportedError,
)
from polyfuse.frontend.host.context import Context
from polyfuse.frontend.host.evaluator import CEvaluator
from polyfuse.frontend.host.libc import LibcState
from polyfuse.frontend.host.memory import Frame, Memory
from polyfuse.frontend.host.params import Params
from polyfuse.frontend.host.signals import Exit, Goto, Signal
from polyfuse.frontend.host.sources import KernelFiles, KernelSources
from polyfuse.frontend.host.statements import exec_decl
from polyfuse.frontend.host.symbolic import fact_to_isl, free_syms, op_syms
from polyfuse.frontend.host.values import (
    PTR_VOID,
    RUNTIME,
    ZERO,
    Arr,
    CType,
    Handle,
    Num,
    Ref,
    Str,
)


class Interpreter:
    """One abstract run of a host program: the parts and the evaluator that drives them."""

    def __init__(self, ast: c_ast.FileAST, kernels: Mapping[str, Kernel], filename: str,
                 param_values: Mapping[str, Union[int, float]],
                 kernel_files: Optional[KernelFiles] = None,
                 argv: Optional[Sequence[str]] = None,
                 device_queries: Optional[DeviceQueries] = None) -> None:
        self.ast = ast
        self.ctx = Context(filename)
        self.params = Params(self.ctx, param_values)
        self.mem = Memory(self.ctx, self.params)
        self.sources = KernelSources(self.ctx, kernels, kernel_files or KernelFiles())
        self.libc = LibcState(None if argv is None else [Path(filename).stem, *argv])
        self.ev = CEvaluator(self.ctx, self.params, self.mem, self.sources, self.libc)
        self.ev.cl.queries = device_queries

    def run(self) -> Program:
        """The :class:`Program` ``main`` runs; a :class:`PolyfuseError` naming file and line
        for what polyfuse cannot follow (never a raw traceback)."""
        try:
            return self._run()
        except PolyfuseError:
            raise
        except Goto as sig:
            raise self.ctx.error(f"goto {sig.label}: only forward jumps within a block and "
                                 "error-handling jumps are supported",
                                 cls=UnsupportedError) from None
        except Signal as sig:
            raise self.ctx.error(f"control flow polyfuse cannot follow ({type(sig).__name__})",
                                 cls=UnsupportedError) from None
        except RecursionError:
            raise self.ctx.error("host program nests too deeply for polyfuse") from None
        except Exception as err:  # never a raw traceback for bad input
            raise self.ctx.error(f"cannot interpret host code: {type(err).__name__}: {err}") \
                from None

    def _run(self) -> Program:
        ev = self.ev
        self.mem.frames.append(Frame("<globals>", [self.mem.globals]))
        for ext in self.ast.ext:
            self.ctx.node = ext
            if isinstance(ext, c_ast.FuncDef):
                ev.funcs[ext.decl.name] = ext
                ev.overloads.setdefault(ext.decl.name, []).append(ext)
            elif isinstance(ext, c_ast.Typedef):
                ev.types.typedefs[ext.name] = ext.type
                ev.types.collect_tags(ext.type)
            elif isinstance(ext, c_ast.Decl):
                ev.types.collect_tags(ext.type)
                if ext.name and not isinstance(ext.type, c_ast.FuncDecl):
                    exec_decl(ev, ext)
        main = ev.funcs.get("main")
        if main is None:
            raise PolyfuseError("no main function in the host program", self.ctx.filename)
        argc: Any = RUNTIME
        argv: Any = Handle("argv")
        if self.libc.argv is not None:
            n = len(self.libc.argv)
            arr = Arr(n + 1, tuple((i, Str(a)) for i, a in enumerate(self.libc.argv)), ZERO)
            argv = Ref(self.mem.new_slot("argv", CType("array", 8 * (n + 1), elem=PTR_VOID,
                                                       length=n + 1), arr))
            argc = Num(sympy.Integer(n))
        try:
            ev.call_function(main, [argc, argv], main)
        except Exit:
            pass
        return self._program()

    def _program(self) -> Program:
        state = self.mem.state
        if self.ctx.unfollowed_calls and not any(isinstance(op, Launch) for op in state.ops):
            by_why: dict[str, list[str]] = {}
            for why, call in dict.fromkeys(self.ctx.unfollowed_calls):
                by_why.setdefault(why, []).append(call)
            said = "; ".join(f"{why}: {', '.join(calls[:3])}" + (
                f" and {len(calls) - 3} more" if len(calls) > 3 else "")
                for why, calls in by_why.items())
            raise UnsupportedError("the host program launches no kernel polyfuse can follow; "
                                   f"it makes calls polyfuse does not follow, {said}",
                                   self.ctx.filename)
        ops = tuple(dataclasses.replace(op, id=i) for i, op in enumerate(state.ops))
        used: set[str] = set()
        for b in state.buffers.values():
            used |= free_syms(b.size, b.origin)
        for op in ops:
            used |= op_syms(op)
        params = tuple(n for n in self.params.symbols if n in used)
        facts = []
        for f in dict.fromkeys(state.facts):
            names = {str(s) for s in f.free_symbols}
            if names and names <= set(params):
                txt = fact_to_isl(f)
                if txt is not None:
                    facts.append(txt)
        context = "{ : }"
        if params:
            body = " and ".join(facts)
            context = f"[{', '.join(params)}] -> {{ : {body} }}" if body else \
                f"[{', '.join(params)}] -> {{ : }}"
            try:
                context = str(isl.Set(context))
            except isl.Error:
                context = f"[{', '.join(params)}] -> {{ : }}"
        filename = self.ctx.filename
        name = Path(filename).stem if not filename.startswith("<") else "program"
        kernels = dict(self.sources.kernels) if self.sources.kernels else \
            dict(self.sources.given)
        return Program(kernels=kernels, buffers=dict(state.buffers), ops=ops,
                       params=params, context=context, name=name, files=(filename,))
