"""The Python builder API: make a :class:`Program` without writing C host code.

Used by the ONNX front-end, by tests and by research scripts::

    b = ProgramBuilder("kernels.cl", name="chain")
    n = b.param("n", min=1)
    b.buffer("A", 4 * n, dtype="float")
    b.buffer("B", 4 * n, dtype="float")
    b.write("A")
    with b.loop("t", 0, 10) as t:
        b.launch("step", global_size=(n,), local_size=(64,), args={"x": "A", "y": "B", "t": t})
    b.read("B", blocking=True)
    prog = b.build()

It validates like the C host front-end (unknown kernel, missing or extra arguments, a buffer bound
to a scalar parameter and vice versa) and represents things the same way: a blocking read or
write is followed by a separate ``sync`` :class:`HostOp`; ``finish()`` is a ``sync`` named
``clFinish``; ``__local`` arguments are ``local`` bindings with their size in bytes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import islpy as isl
import sympy

from polyfuse.core.program import (
    ArgBinding,
    Buffer,
    BufferRange,
    HostLoop,
    HostOp,
    Kernel,
    KernelParam,
    Launch,
    Operation,
    PolyfuseError,
    Program,
)

ExprLike = Union[int, str, sympy.Expr]


@dataclass(frozen=True)
class LocalArg:
    """The value of a ``__local`` pointer argument: a work-group buffer of ``nbytes`` bytes."""

    nbytes: Any


def local(nbytes: ExprLike) -> LocalArg:
    """Mark an argument as ``__local`` memory of ``nbytes`` bytes (``clSetKernelArg(.., NULL)``)."""
    return LocalArg(nbytes)


class ProgramBuilder:
    """Build a :class:`Program` step by step, in host order."""

    def __init__(
        self,
        kernels: Union[str, os.PathLike, Mapping[str, Kernel], Iterable[Kernel]],
        name: str = "program",
        *,
        files: Sequence[str] = (),
    ):
        self.kernels = _kernels(kernels)
        self.name = name
        self.files = tuple(files)
        if isinstance(kernels, (str, os.PathLike)) and not self.files:
            text = str(kernels)
            if "\n" not in text and os.path.exists(text):
                self.files = (text,)
        self.buffers: dict[str, Buffer] = {}
        self.ops: list[Operation] = []
        self._params: dict[str, sympy.Symbol] = {}
        self._fixed: dict[str, sympy.Integer] = {}
        self._constraints: list[str] = []
        self._loops: list[HostLoop] = []

    # -- parameters ---------------------------------------------------------------------------

    def param(self, name: str, value: Optional[int] = None, *, min: Optional[int] = None,
              max: Optional[int] = None) -> sympy.Expr:
        """A host parameter: a symbol (with optional bounds), or ``value`` when it is fixed."""
        if not name.isidentifier() or name.startswith("_"):
            raise PolyfuseError(f"parameter name {name!r} must be a C identifier without a "
                                "leading underscore")
        if value is not None:
            self._fixed[name] = sympy.Integer(int(value))
            return self._fixed[name]
        sym = self._params.setdefault(name, sympy.Symbol(name))
        if min is not None:
            self._constraints.append(f"{name} >= {int(min)}")
        if max is not None:
            self._constraints.append(f"{name} <= {int(max)}")
        return sym

    def assume(self, constraint: str) -> None:
        """Add an isl constraint over parameters to the context, e.g. ``"n % 64 = 0"``."""
        self._constraints.append(constraint.replace("%", " mod "))

    def _expr(self, v: ExprLike, what: str) -> sympy.Expr:
        if isinstance(v, bool):
            raise PolyfuseError(f"{what}: expected an integer expression, got {v!r}")
        if isinstance(v, int):
            return sympy.Integer(v)
        if isinstance(v, str):
            names = {**self._params, **self._fixed, **{lp.iterator: sympy.Symbol(lp.iterator)
                                        for lp in self._loops}}
            try:
                v = sympy.sympify(v, locals=names)
            except (sympy.SympifyError, SyntaxError, TypeError) as err:
                raise PolyfuseError(f"{what}: cannot read {v!r}: {err}") from None
        if not isinstance(v, sympy.Expr):
            raise PolyfuseError(f"{what}: expected an integer expression, got {v!r}")
        iters = {lp.iterator for lp in self._loops}
        for s in v.free_symbols:
            if str(s) not in iters:
                self._params.setdefault(str(s), sympy.Symbol(str(s)))
        return v

    # -- buffers ------------------------------------------------------------------------------

    def buffer(self, name: str, size_bytes: Optional[ExprLike], dtype: Optional[str] = "float",
               *, flags: Sequence[str] = ("CL_MEM_READ_WRITE",)) -> str:
        """Declare a device buffer of ``size_bytes`` bytes; returns its name."""
        self._new_buffer_name(name)
        size = None if size_bytes is None else self._expr(size_bytes, f"size of buffer {name!r}")
        self.buffers[name] = Buffer(name=name, size=size, flags=tuple(flags), dtype=dtype)
        return name

    def sub_buffer(self, name: str, parent: str, origin: ExprLike, size: ExprLike, *,
                   dtype: Optional[str] = None, flags: Sequence[str] = ()) -> str:
        """Declare a sub-buffer (``clCreateSubBuffer``) of ``parent`` at byte ``origin``."""
        self._new_buffer_name(name)
        par = self._buffer(parent, f"parent of sub-buffer {name!r}")
        self.buffers[name] = Buffer(
            name=name, size=self._expr(size, f"size of sub-buffer {name!r}"), parent=parent,
            origin=self._expr(origin, f"origin of sub-buffer {name!r}"), flags=tuple(flags),
            dtype=dtype or par.dtype)
        return name

    def _new_buffer_name(self, name: str) -> None:
        if not name.isidentifier():
            raise PolyfuseError(f"buffer name {name!r} must be an identifier")
        if name in self.buffers:
            raise PolyfuseError(f"buffer {name!r} is declared twice")

    def _buffer(self, name: Any, what: str) -> Buffer:
        if not isinstance(name, str) or name not in self.buffers:
            known = ", ".join(self.buffers) or "none"
            raise PolyfuseError(f"{what}: unknown buffer {name!r} (declared: {known})")
        return self.buffers[name]

    def _range(self, buffer: str, offset: ExprLike, size: Optional[ExprLike],
               what: str) -> BufferRange:
        self._buffer(buffer, what)
        return BufferRange(buffer, self._expr(offset, f"{what} offset"),
                           None if size is None else self._expr(size, f"{what} size"))

    # -- host operations ----------------------------------------------------------------------

    def _add(self, op: Operation) -> int:
        import dataclasses

        op = dataclasses.replace(op, id=len(self.ops), loops=tuple(self._loops))
        self.ops.append(op)
        return op.id

    def write(self, buffer: str, offset: ExprLike = 0, size: Optional[ExprLike] = None, *,
              blocking: bool = False) -> int:
        """Host → device (``clEnqueueWriteBuffer``); ``size`` None means to the end."""
        return self._transfer("write", buffer, offset, size, blocking)

    def read(self, buffer: str, offset: ExprLike = 0, size: Optional[ExprLike] = None, *,
             blocking: bool = False) -> int:
        """Device → host (``clEnqueueReadBuffer``); ``size`` None means to the end."""
        return self._transfer("read", buffer, offset, size, blocking)

    def _transfer(self, kind: str, buffer: str, offset: ExprLike, size: Optional[ExprLike],
                  blocking: bool) -> int:
        """A host ``write`` or ``read`` of a byte range, then a sync when it blocks, as the
        host front-end records ``clEnqueue{Write,Read}Buffer``."""
        rng = self._range(buffer, offset, size, kind)
        call = "clEnqueueWriteBuffer" if kind == "write" else "clEnqueueReadBuffer"
        if kind == "write":
            op = self._add(HostOp(0, "write", writes=(rng,), name=call))
        else:
            op = self._add(HostOp(0, "read", reads=(rng,), name=call))
        if blocking:
            self._add(HostOp(0, "sync", name=call))
        return op

    def copy(self, src: str, dst: str, size: Optional[ExprLike] = None, *,
             src_offset: ExprLike = 0, dst_offset: ExprLike = 0) -> int:
        """Device → device (``clEnqueueCopyBuffer``)."""
        return self._add(HostOp(0, "copy", reads=(self._range(src, src_offset, size, "copy"),),
                                writes=(self._range(dst, dst_offset, size, "copy"),),
                                name="clEnqueueCopyBuffer"))

    def fill(self, buffer: str, offset: ExprLike = 0, size: Optional[ExprLike] = None) -> int:
        """``clEnqueueFillBuffer``: a write of the range."""
        rng = self._range(buffer, offset, size, "fill")
        return self._add(HostOp(0, "write", writes=(rng,), name="clEnqueueFillBuffer"))

    def unknown(self, name: str, *buffers: str) -> int:
        """A call polyfuse does not know that receives ``buffers``: reads and writes them all."""
        rngs = tuple(self._range(b, 0, None, name) for b in buffers)
        return self._add(HostOp(0, "unknown", reads=rngs, writes=rngs, name=name))

    def finish(self) -> int:
        """``clFinish``: a ``sync`` operation."""
        return self._add(HostOp(0, "sync", name="clFinish"))

    @contextlib.contextmanager
    def loop(self, iterator: str, lower: ExprLike, upper: ExprLike,
             step: int = 1) -> Iterator[sympy.Symbol]:
        """A counted host loop ``for (it = lower; it < upper; it += step)``; yields ``it``."""
        if not iterator.isidentifier():
            raise PolyfuseError(f"loop iterator {iterator!r} must be an identifier")
        if iterator in self._params or any(lp.iterator == iterator for lp in self._loops):
            raise PolyfuseError(f"loop iterator {iterator!r} clashes with a parameter or an "
                                "enclosing loop")
        if not isinstance(step, int) or step <= 0:
            raise PolyfuseError(f"loop {iterator!r}: step must be a positive integer")
        lo = self._expr(lower, f"lower bound of loop {iterator!r}")
        hi = self._expr(upper, f"upper bound of loop {iterator!r}")
        self._loops.append(HostLoop(iterator, lo, hi, step))
        try:
            yield sympy.Symbol(iterator)
        finally:
            self._loops.pop()

    # -- launches -----------------------------------------------------------------------------

    def launch(
        self,
        kernel: str,
        global_size: Union[ExprLike, Sequence[ExprLike]],
        local_size: Union[None, ExprLike, Sequence[ExprLike]] = None,
        args: Union[Mapping[Union[str, int], Any], Sequence[Any]] = (),
        *,
        global_offset: Optional[Sequence[ExprLike]] = None,
        kernel_object: Optional[str] = None,
    ) -> int:
        """Launch ``kernel``; ``args`` by parameter name/index (dict) or positionally (list).

        A buffer parameter takes a buffer name, a scalar an integer expression (None: unknown),
        a ``__local`` pointer :func:`local` (or a byte count).  Returns the launch id.
        """
        if kernel not in self.kernels:
            avail = ", ".join(self.kernels) or "none"
            raise PolyfuseError(f"launch: no kernel named {kernel!r} (available: {avail})")
        k = self.kernels[kernel]
        gs = self._sizes(global_size, f"launch of {kernel!r}: global size")
        if not 1 <= len(gs) <= 3:
            raise PolyfuseError(f"launch of {kernel!r}: 1 to 3 dimensions, got {len(gs)}")
        ls = None
        if local_size is not None:
            ls = self._sizes(local_size, f"launch of {kernel!r}: local size")
            if len(ls) != len(gs):
                raise PolyfuseError(f"launch of {kernel!r}: local size has {len(ls)} "
                                    f"dimensions, global size {len(gs)}")
        off = None
        if global_offset is not None:
            off = self._sizes(global_offset, f"launch of {kernel!r}: global offset")
        values = self._arg_map(k, args)
        missing = [p.index for p in k.params if p.index not in values]
        if missing:
            names = ", ".join(f"{i} ({k.params[i].name})" for i in missing)
            raise PolyfuseError(f"launch of kernel {kernel!r} with unset arguments: {names}")
        bindings = tuple(self._bind(k, k.params[i], values[i]) for i in sorted(values))
        return self._add(Launch(0, kernel, len(gs), gs, ls, bindings, global_offset=off,
                                kernel_object=kernel_object or kernel))

    def _sizes(self, v: Any, what: str) -> tuple:
        items = list(v) if isinstance(v, (list, tuple)) else [v]
        return tuple(self._expr(x, f"{what}[{i}]") for i, x in enumerate(items))

    def _arg_map(self, k: Kernel, args: Any) -> dict[int, Any]:
        out: dict[int, Any] = {}
        if isinstance(args, Mapping):
            for key, val in args.items():
                try:
                    p = k.param(key)
                except KeyError:
                    names = ", ".join(p.name for p in k.params)
                    raise PolyfuseError(f"launch of {k.name!r}: no parameter {key!r} "
                                        f"(parameters: {names})") from None
                if p.index in out:
                    raise PolyfuseError(f"launch of {k.name!r}: parameter {p.name!r} given "
                                        "twice")
                out[p.index] = val
            return out
        seq = list(args)
        if len(seq) > len(k.params):
            raise PolyfuseError(f"launch of {k.name!r}: {len(seq)} arguments for "
                                f"{len(k.params)} parameters")
        return dict(enumerate(seq))

    def _bind(self, k: Kernel, p: KernelParam, val: Any) -> ArgBinding:
        desc = f"launch of {k.name!r}: parameter {p.index} ({p.name!r})"
        if p.pointer and p.address_space == "local":
            if isinstance(val, LocalArg):
                val = val.nbytes
            if isinstance(val, str) and val in self.buffers:
                raise PolyfuseError(f"{desc} is a __local pointer; pass local(nbytes)")
            return ArgBinding(p.index, "local", local_bytes=self._expr(val, f"{desc} size"))
        if p.is_buffer:
            if not isinstance(val, str) or val not in self.buffers:
                known = ", ".join(self.buffers) or "none"
                raise PolyfuseError(f"{desc} is a buffer; got {val!r} (declared buffers: "
                                    f"{known})")
            return ArgBinding(p.index, "buffer", buffer=val)
        if p.pointer:
            raise PolyfuseError(f"{desc}: pointer parameters in address space "
                                f"{p.address_space!r} cannot be bound from the host")
        if isinstance(val, LocalArg) or (isinstance(val, str) and val in self.buffers):
            raise PolyfuseError(f"{desc} is a scalar ({p.type}); got buffer or local {val!r}")
        if val is None:
            return ArgBinding(p.index, "scalar", value=None)
        if isinstance(val, float) or p.type in ("float", "double", "half"):
            try:
                return ArgBinding(p.index, "scalar", value=sympy.Float(val))
            except (TypeError, ValueError):
                return ArgBinding(p.index, "scalar", value=None)
        return ArgBinding(p.index, "scalar", value=self._expr(val, desc))

    # -- result -------------------------------------------------------------------------------

    def build(self) -> Program:
        """The :class:`Program`; its context is checked by isl."""
        if self._loops:
            raise PolyfuseError("build() inside a loop")
        params = tuple(self._params)
        context = "{ : }"
        if params:
            body = " and ".join(f"({c})" for c in self._constraints)
            context = f"[{', '.join(params)}] -> {{ : {body} }}"
        elif self._constraints:
            context = "{ : " + " and ".join(f"({c})" for c in self._constraints) + " }"
        try:
            isl.Set(context)
        except isl.Error as err:
            raise PolyfuseError(f"invalid parameter context {context!r}: {err}") from None
        return Program(kernels=dict(self.kernels), buffers=dict(self.buffers),
                       ops=tuple(self.ops), params=params, context=context, name=self.name,
                       files=self.files)


def default_program(kernels: Union[Mapping[str, Kernel], Iterable[Kernel]], *,
                    params: Mapping[str, int] = {},  # noqa: B006 - read only
                    name: str = "program") -> Program:
    """The program assumed when only a ``.cl`` file is given (no host code).

    Each kernel is launched once, in file order.  A buffer parameter is bound to a buffer named
    after the parameter (the same name in two kernels is the same buffer; size unknown, dtype
    the element type).  An integer scalar is the host parameter of the same name (shared across
    kernels); a floating-point scalar is unknown (None).  ``__local`` pointers get an unknown
    size.  Global sizes are parameters ``<kernel>_gs0``... (``>= 1``); the local size is None
    unless the kernel declares ``reqd_work_group_size``.  ``params`` fixes parameters by name.
    No host operation is added.
    """
    ks = _kernels(kernels)
    b = ProgramBuilder(ks, name=name)

    def value(pname: str) -> sympy.Expr:
        if pname in params:
            return sympy.Integer(int(params[pname]))
        return b.param(pname)

    for k in ks.values():
        for p in k.params:
            if p.is_buffer and p.name not in b.buffers:
                b.buffers[p.name] = Buffer(name=p.name, size=None, dtype=p.type,
                                           flags=("CL_MEM_READ_WRITE",))
    for k in ks.values():
        dims = max(1, min(3, k.work_dims or 1))
        gs = []
        for d in range(dims):
            gname = f"{k.name}_gs{d}"
            gs.append(value(gname))
            if gname not in params:
                b._constraints.append(f"{gname} >= 1")
        ls = None
        req = k.context.local_size[:dims] if k.context else ()
        if req and all(x is not None for x in req):
            ls = tuple(sympy.Integer(x) for x in req)
        args = []
        for p in k.params:
            if p.pointer and p.address_space == "local":
                args.append(ArgBinding(p.index, "local", local_bytes=None))
            elif p.is_buffer:
                args.append(ArgBinding(p.index, "buffer", buffer=p.name))
            elif p.pointer or p.type in ("float", "double", "half") or \
                    not p.name.isidentifier() or p.name.startswith("_"):
                args.append(ArgBinding(p.index, "scalar", value=None))
            else:
                args.append(ArgBinding(p.index, "scalar", value=value(p.name)))
        b._add(Launch(0, k.name, dims, tuple(gs), ls, tuple(args), kernel_object=k.name))
    return b.build()


def _kernels(kernels: Any) -> dict[str, Kernel]:
    if isinstance(kernels, (str, os.PathLike)):
        from polyfuse.frontend.opencl import parse_kernels

        return dict(parse_kernels(os.fspath(kernels)))
    if isinstance(kernels, Mapping):
        return dict(kernels)
    out: dict[str, Kernel] = {}
    for k in kernels:
        if not isinstance(k, Kernel):
            raise PolyfuseError(f"expected Kernel records, got {type(k).__name__}")
        out[k.name] = k
    return out
