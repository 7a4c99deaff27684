"""The OpenCL C API as a table of handlers, shared by C hosts and the C++ wrapper.

:data:`HANDLERS` maps an API function's name to a :data:`Handler`: a function of the evaluator
(:class:`~.evaluator.CEvaluator`), the call's node and its evaluated arguments, returning the
call's value and recording its effects (buffers created, :class:`~polyfuse.core.program.Launch`
and :class:`~polyfuse.core.program.HostOp` operations, kernel argument bindings).  The C++ wrapper
model (:mod:`.clhpp`) maps ``cl::Buffer``, ``cl::Kernel::setArg``,
``enqueueNDRangeKernel``... onto the same entries.  Adding an API call is one entry::

    @handler("clEnqueueSVMMemFill")
    def enqueue_svm_mem_fill(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
        ...

Every call is assumed to succeed: create calls store ``CL_SUCCESS`` through their
``errcode_ret`` pointer (:func:`succeed`), and handles are non-NULL.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.c import syntax, types
from polyfuse.core.program import (
    ArgBinding,
    Buffer,
    BufferRange,
    DeviceQueries,
    HostOp,
    Launch,
    UnsupportedError,
)
from polyfuse.frontend.host.memory import KState
from polyfuse.frontend.host.signals import NeedUnroll
from polyfuse.frontend.host.symbolic import free_syms
from polyfuse.frontend.host.values import (
    UNK,
    UNK_TYPE,
    ZERO,
    Arr,
    BufRef,
    CType,
    ElemPtr,
    Handle,
    KObj,
    Num,
    Poison,
    ProgObj,
    Rec,
    Ref,
    Runtime,
    Str,
    Unknown,
    Value,
    arg_at,
    c_unescape,
    scalar_value,
    truth_of,
)

if TYPE_CHECKING:
    from polyfuse.frontend.host.evaluator import CEvaluator

_MEM_FLAGS = {
    1 << 0: "CL_MEM_READ_WRITE",
    1 << 1: "CL_MEM_WRITE_ONLY",
    1 << 2: "CL_MEM_READ_ONLY",
    1 << 3: "CL_MEM_USE_HOST_PTR",
    1 << 4: "CL_MEM_ALLOC_HOST_PTR",
    1 << 5: "CL_MEM_COPY_HOST_PTR",
    1 << 7: "CL_MEM_HOST_WRITE_ONLY",
    1 << 8: "CL_MEM_HOST_READ_ONLY",
    1 << 9: "CL_MEM_HOST_NO_ACCESS",
}
_CL_MAP_READ, _CL_MAP_WRITE, _CL_MAP_WRITE_INVALIDATE = 1, 2, 4
_CL_KERNEL_FUNCTION_NAME, _CL_KERNEL_NUM_ARGS = 0x1190, 0x1191

#: a call's handler: the evaluator, the call's node and its evaluated arguments -> its value
Handler = Callable[["CEvaluator", c_ast.FuncCall, list[Value]], Value]

#: the OpenCL API's handlers, by function name
HANDLERS: dict[str, Handler] = {}


def handler(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of the API calls ``names``."""
    def register(fn: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = fn
        return fn
    return register


class OpenCLObjects:
    """The counters that name the OpenCL objects of one run (the objects themselves live in
    :class:`~.memory.State`, which branches clone)."""

    def __init__(self) -> None:
        self.next_oid = 0
        self.buffer_names: set[str] = set()
        # buffers created inside a symbolic host loop: one name per creation (call site and
        # how many times it ran before in the pass), so every pass over the body reuses it
        self.scratch_names: dict[tuple[int, int], str] = {}
        self.scratch_count: dict[int, int] = {}
        self.queries: Optional[DeviceQueries] = None  # the device that answers info queries
        # where that device said it supports images (the host may then take an image path)
        self.image_support_at: Optional[str] = None

    def new_buffer_name(self, hint: Optional[str]) -> str:
        """A fresh buffer name after the variable the handle is stored in (``bufs[1]`` →
        ``bufs_1``; a second buffer in the same variable gets ``_1``)."""
        name = syntax.fresh_name(re.sub(r"\W", "_", hint or "buffer"),
                                 self.buffer_names.__contains__)
        self.buffer_names.add(name)
        return name

    def scratch_buffer_name(self, site: int, hint: Optional[str]) -> str:
        """The name of the buffer a creation at ``site`` inside a symbolic host loop makes:
        the same in every pass over the loop body (see :func:`.loops.symbolic_loop`)."""
        n = self.scratch_count.get(site, 0)
        self.scratch_count[site] = n + 1
        if (site, n) not in self.scratch_names:
            self.scratch_names[site, n] = self.new_buffer_name(hint)
        return self.scratch_names[site, n]

    def new_kernel_object(self) -> int:
        """The id of a new ``cl_kernel`` object."""
        self.next_oid += 1
        return self.next_oid - 1


def succeed(ev: CEvaluator, args: list) -> None:
    """OpenCL create calls succeed: ``*errcode_ret = CL_SUCCESS`` (their last argument)."""
    if args and isinstance(args[-1], Ref) and \
            isinstance(ev.mem.read(args[-1]), (Unknown, Num, Runtime)):
        ev.mem.write(args[-1], ZERO)


def buffer_arg(ev: CEvaluator, v: Any, what: str, node: c_ast.Node) -> str:
    """The name of the buffer an argument holds; an error naming ``what`` otherwise."""
    if isinstance(v, BufRef):
        if v.name not in ev.mem.state.buffers:
            raise ev.ctx.error(f"{what}: buffer '{v.name}' was not created on this path",
                               node)
        return v.name
    if isinstance(v, Poison):
        raise ev.ctx.error(f"{what}: the buffer is {v.reason}", node, UnsupportedError)
    raise ev.ctx.error(f"{what} is not a buffer created with clCreateBuffer or "
                       "clCreateSubBuffer", node, UnsupportedError)


def sync(ev: CEvaluator, name: str, node: c_ast.Node) -> None:
    """Record a ``sync`` operation (the host waits for the queue) made by ``name``."""
    ev.record(HostOp(id=0, kind="sync", name=name), node)




@handler("clCreateBuffer")
def create_buffer(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    succeed(ev, args)
    flags_v = arg_at(args, 1)
    host_ptr = arg_at(args, 3)
    if isinstance(flags_v, Num) and not flags_v.e.is_Integer and \
            isinstance(host_ptr, Num) and host_ptr.e == 0:
        # flags chosen at run time (a vendor's extra flag): without a host pointer no
        # host-pointer flag can be set, and the access flags do not change what runs
        flags_v = UNK
    flags = ev.concrete(flags_v, "clCreateBuffer flags", node) if isinstance(
        flags_v, Num) else 0
    size = ev.int_value(arg_at(args, 2), "buffer size", node, required=False)
    if ev.ctx.loops:
        # a scratch buffer of the iteration: one buffer that every iteration reuses (the
        # loop checks its handle does not outlive the iteration); its size must not vary
        if size is None or free_syms(size) & ev.ctx.loop_syms:
            raise NeedUnroll("a buffer whose size changes per iteration is created inside "
                             "a host loop")
        name = ev.cl.scratch_buffer_name(id(node), ev.ctx.name_hint)
    else:
        name = ev.cl.new_buffer_name(ev.ctx.name_hint)
    names = tuple(n for bit, n in _MEM_FLAGS.items() if flags & bit)
    ev.mem.state.buffers[name] = Buffer(name=name, size=size, flags=names, loc=ev.ctx.loc(node))
    if flags & ((1 << 5) | (1 << 3)):
        ev.record(HostOp(id=0, kind="write", writes=(BufferRange(name, sympy.Integer(0),
                                                                 size),),
                         name="clCreateBuffer"), node)
    return BufRef(name)


@handler("clCreateSubBuffer")
def create_sub_buffer(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    succeed(ev, args)
    parent = buffer_arg(ev, arg_at(args, 0), "clCreateSubBuffer parent", node)
    flags_v = arg_at(args, 1)
    flags = int(flags_v.e) if isinstance(flags_v, Num) and flags_v.e.is_Integer else 0
    info = arg_at(args, 3)
    region = ev.mem.read(info) if isinstance(info, Ref) else None
    if not isinstance(region, Rec):
        raise ev.ctx.error("clCreateSubBuffer: the region is not a cl_buffer_region polyfuse "
                           "can follow", node, UnsupportedError)
    origin = ev.int_value(region.get("origin"), "sub-buffer origin", node)
    size = ev.int_value(region.get("size"), "sub-buffer size", node)
    if ev.ctx.loops:
        raise NeedUnroll("a sub-buffer is created inside a host loop")
    name = ev.cl.new_buffer_name(ev.ctx.name_hint)
    names = tuple(n for bit, n in _MEM_FLAGS.items() if flags & bit)
    ev.mem.state.buffers[name] = Buffer(name=name, size=size, parent=parent, origin=origin,
                                        flags=names, loc=ev.ctx.loc(node))
    return BufRef(name)


@handler("clCreateKernel")
def create_kernel(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    succeed(ev, args)
    kname = arg_at(args, 1)
    if isinstance(kname, Ref) and (text := ev.mem.text(kname)) is not None:
        kname = Str(text)  # a char buffer the host copied a known name into (strcpy, sprintf)
    if not isinstance(kname, Str):
        raise ev.ctx.error(f"clCreateKernel: {unknown_kernel_name(ev, kname, node)}", node,
                           UnsupportedError)
    names = ev.sources.program_kernels(arg_at(args, 0), node)
    if kname.s not in names:
        avail = ", ".join(sorted(names)) or "none"
        raise ev.ctx.error(f"clCreateKernel: no kernel named '{kname.s}' (available: "
                           f"{avail})", node)
    if ev.ctx.loops:
        raise NeedUnroll("a kernel object is created inside a host loop")
    oid = ev.cl.new_kernel_object()
    ev.mem.state.kobjs[oid] = KState(var=ev.ctx.name_hint or kname.s, kernel=names[kname.s])
    return KObj(oid)


def unknown_kernel_name(ev: CEvaluator, v: Any, node: c_ast.FuncCall) -> str:
    """Why a kernel name is not known, naming the variable that holds it."""
    arg = node.args.exprs[1] if node.args is not None and len(node.args.exprs) > 1 else None
    while isinstance(arg, c_ast.Cast) or isinstance(arg, c_ast.FuncCall) and \
            isinstance(arg.name, c_ast.ID) and arg.name.name.startswith("basic_string__") \
            and arg.args is not None and arg.args.exprs:  # a std::string made from the name
        arg = arg.expr if isinstance(arg, c_ast.Cast) else arg.args.exprs[0]
    named = f" in '{arg.name}'" if isinstance(arg, c_ast.ID) else ""
    why = ev.mem.state.text_why.get(v.slot) if isinstance(v, Ref) else None
    if why:
        return f"the kernel name{named} is text the host copies or builds at run time: {why}"
    if isinstance(v, Ref) and isinstance(ev.mem.read(v), (Arr, Unknown, Runtime)):
        return (f"the kernel name{named} is text the host copies or builds at run time "
                "(strcpy, a library call), which polyfuse does not follow; name the kernel "
                "with a string literal or a variable initialised with one")
    if isinstance(v, Ref) and isinstance(ev.mem.read(v), Poison):
        v = ev.mem.read(v)
    if isinstance(v, Poison):
        return f"the kernel name{named} is {v.reason}"
    return f"the kernel name{named} is not a string polyfuse can follow"


@handler("clCreateProgramWithSource")
def create_program_with_source(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    succeed(ev, args)
    count = arg_at(args, 1)
    n = int(count.e) if isinstance(count, Num) and count.e.is_Integer else 1
    strings = arg_at(args, 2)
    held = _strings_held(ev, strings)
    if n < 1 or n > (MAX_SOURCE_STRINGS if held is None else held):
        has = (f"the strings array it reads holds {held}" if held is not None else
               f"polyfuse follows at most {MAX_SOURCE_STRINGS} source strings")
        raise ev.ctx.error(f"clCreateProgramWithSource: count is {n}, but {has}", node,
                           UnsupportedError)
    pieces: list = []
    for i in range(max(n, 1)):
        ref = ev.mem.index(strings, Num(sympy.Integer(i))) if isinstance(strings, Ref) \
            else None
        v = ev.mem.read(ref) if isinstance(ref, Ref) else UNK
        pieces.append(source_piece(ev, v))
    return ev.sources.create(pieces, ev.ctx.loc(node))


MAX_SOURCE_STRINGS = 4096


def _strings_held(ev: CEvaluator, strings: Value) -> Optional[int]:
    """How many ``char *`` the strings argument points to, so that a count past its end is
    refused at the call rather than read (and looped over) as that many unknown pieces; ``None``
    where the extent is not known."""
    if not isinstance(strings, Ref):
        return None
    target = ev.mem.read(strings)
    if isinstance(target, Arr):
        return target.length
    last = strings.path[-1] if strings.path else None
    if isinstance(last, int):
        whole = ev.mem.read(Ref(strings.slot, strings.path[:-1]))
        return whole.length - last if isinstance(whole, Arr) and whole.length is not None \
            else None
    return 1 if isinstance(target, (Str, Ref)) else None


@handler("clCreateProgramWithBinary")
def create_program_with_binary(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    succeed(ev, args)
    return ev.sources.create([("unknown", "built from a binary")], ev.ctx.loc(node))


def source_piece(ev: CEvaluator, v: Any) -> tuple[str, str]:
    if isinstance(v, Str):
        return ("text", c_unescape(v.s))
    if isinstance(v, Ref) and v.slot in ev.mem.file_texts:
        return ("file", ev.mem.file_texts[v.slot])
    if isinstance(v, Ref) and v.slot in ev.mem.texts:
        return ("text", ev.mem.texts[v.slot])
    if ev.sources.opened:  # a kernel file the host opened but read in a way polyfuse did not see
        return ("file", ev.sources.opened[-1])
    return ("unknown", "a source string polyfuse cannot follow")


@handler("clBuildProgram", "clCompileProgram")
def build_program(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    prog = arg_at(args, 0)
    opts = arg_at(args, 3)
    if isinstance(prog, ProgObj):
        info = ev.sources.programs[prog.pid]
        if isinstance(opts, Str):
            info.options = opts.s
        elif isinstance(opts, Ref) and opts.slot in ev.mem.texts:
            info.options = ev.mem.texts[opts.slot]
        elif not (isinstance(opts, Num) and opts.e == 0):
            why = ev.mem.state.text_why.get(opts.slot, "") if isinstance(opts, Ref) else ""
            raise ev.ctx.error("clBuildProgram: build options polyfuse cannot determine "
                               f"(they may define macros the kernels use){': ' if why else ''}"
                               f"{why}", node, UnsupportedError)
    return ZERO


@handler("clCreateImage", "clCreateImage2D", "clCreateImage3D", "clCreateImageWithProperties",
         "clEnqueueReadImage", "clEnqueueWriteImage", "clEnqueueCopyImage",
         "clEnqueueCopyImageToBuffer", "clEnqueueCopyBufferToImage", "clEnqueueFillImage",
         "clEnqueueMapImage")
def image_call(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """OpenCL images are not modelled (polyfuse fuses buffer kernels): refused at the first
    image call, naming the device query that sent the host down its image path."""
    why = ""
    if ev.cl.image_support_at is not None and ev.cl.queries is not None:
        why = (f"; the host takes its image path because the device that verifies the program "
               f"({ev.cl.queries.name}) answered clGetDeviceInfo(CL_DEVICE_IMAGE_SUPPORT) at "
               f"{ev.cl.image_support_at} with true: verify on a device without image support "
               "(--device PLATFORM:DEVICE) to analyse the host's buffer path")
    raise ev.ctx.error(f"{node.name.name}: OpenCL images (image objects, and read_image*/"
                       f"write_image* in kernels) are not modelled by polyfuse{why}", node,
                       UnsupportedError)


def kernel_object(ev: CEvaluator, v: Any, node: c_ast.Node) -> KState:
    """The kernel object a value holds; an error otherwise."""
    if isinstance(v, KObj) and v.oid in ev.mem.state.kobjs:
        return ev.mem.state.kobjs[v.oid]
    if isinstance(v, Poison):
        raise ev.ctx.error(f"the kernel object is {v.reason}", node, UnsupportedError)
    raise ev.ctx.error("not a kernel object created with clCreateKernel", node,
                       UnsupportedError)


def data_origin(value: Value) -> str:
    """Where a value computed from the program's data was read (a read-back, a data file),
    or "" where polyfuse knows the value or cannot tell."""
    src = value.src if isinstance(value, (Runtime, Unknown)) else None
    return src.describe() if src is not None else ""


@handler("clSetKernelArg")
def set_kernel_arg(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    kv = arg_at(args, 0)
    ks = kernel_object(ev, kv, node)
    kernel = ev.sources.kernels[ks.kernel]
    idx = ev.concrete(arg_at(args, 1), "clSetKernelArg index", node)
    if idx < 0 or idx >= len(kernel.params):
        raise ev.ctx.error(f"clSetKernelArg: argument index {idx} out of range for kernel "
                           f"'{kernel.name}' ({len(kernel.params)} parameters)", node)
    param = kernel.params[idx]
    size = arg_at(args, 2)
    ptr = arg_at(args, 3)
    loc = ev.ctx.loc(node)
    pdesc = f"parameter {idx} ('{param.name}') of kernel '{kernel.name}'"
    if isinstance(ptr, Num) and ptr.e == 0:
        if param.pointer and param.address_space == "local":
            nbytes = ev.int_value(size, "local memory size", node)
            binding = ArgBinding(idx, "local", local_bytes=nbytes, loc=loc)
        else:
            raise ev.ctx.error(f"clSetKernelArg: NULL value for {pdesc}, which is not a "
                               "__local pointer", node)
    elif isinstance(ptr, Ref):
        value = ev.mem.deref(ptr)
        if value == ptr and isinstance(ev.mem.read(ptr), Arr):
            # a pointer to the first of several handles (`cl_mem bufs[2]`, or fresh memory a
            # handle was stored into: `*(cl_mem *)p = clCreateBuffer(...)`): the first
            at = ev.mem.index(ptr, ZERO)
            value = ev.mem.read(at) if isinstance(at, Ref) else value
        if param.pointer and param.address_space == "local":
            raise ev.ctx.error(f"clSetKernelArg: {pdesc} is a __local pointer; its value "
                               "must be NULL with a size", node)
        nbytes = size.e if isinstance(size, Num) and size.e.is_Integer else None
        if isinstance(value, BufRef):
            if nbytes is not None and nbytes != 8:
                raise ev.ctx.error(f"clSetKernelArg: size {nbytes} for buffer "
                                   f"'{value.name}' bound to {pdesc}; a cl_mem argument "
                                   "takes sizeof(cl_mem)", node)
            if not param.is_buffer:
                raise ev.ctx.error(f"clSetKernelArg: buffer '{value.name}' bound to {pdesc}, "
                                   "which is not a __global/__constant pointer", node)
            buffer_arg(ev, value, "clSetKernelArg", node)
            binding = ArgBinding(idx, "buffer", buffer=value.name, loc=loc)
        elif isinstance(value, Poison):
            if param.pointer:
                raise ev.ctx.error(f"clSetKernelArg: the buffer for {pdesc} is "
                                   f"{value.reason}", node, UnsupportedError)
            binding = ArgBinding(idx, "scalar", value=None, loc=loc)
        elif param.pointer:
            raise ev.ctx.error(f"clSetKernelArg: {pdesc} is a pointer but the value is not a "
                               "buffer (pass &buf with a cl_mem created by clCreateBuffer)",
                               node)
        else:
            want = types.size_of(param.type)
            if nbytes is not None and want is not None and nbytes != want:
                raise ev.ctx.error(f"clSetKernelArg: size {nbytes} for {pdesc} of type "
                                   f"{param.type} ({want} bytes)", node)
            binding = ArgBinding(idx, "scalar", value=scalar_value(value, param.type),
                                 loc=loc, origin=data_origin(value))
    elif isinstance(ptr, BufRef):
        raise ev.ctx.error(f"clSetKernelArg: pass the address of the cl_mem (&{ptr.name}) "
                           f"for {pdesc}", node)
    else:
        if param.pointer:
            raise ev.ctx.error(f"clSetKernelArg: cannot tell which buffer is bound to {pdesc}",
                               node, UnsupportedError)
        binding = ArgBinding(idx, "scalar", value=None, loc=loc)
    ev.mem.state.kobjs[kv.oid] = ks.bind(idx, binding)
    return ZERO


def sizes(ev: CEvaluator, v: Any, dim: int, what: str, node: c_ast.Node) -> Optional[tuple]:
    """The ``dim`` integers of a ``size_t`` array argument (None for NULL)."""
    if isinstance(v, Num) and v.e == 0:
        return None
    if isinstance(v, ElemPtr):  # `&dims.front()` of a std::vector (a clhpp.Vec)
        items = getattr(ev.mem.read(v.of), "items", None)
        if items is None or len(items) < v.pos + dim:
            raise ev.ctx.error(f"{what}: the elements of the std::vector it points into are "
                               "not known", node, UnsupportedError)
        return tuple(ev.int_value(e, f"{what}[{i}]", node)
                     for i, e in enumerate(items[v.pos:v.pos + dim]))
    if not isinstance(v, Ref):
        raise ev.ctx.error(f"{what}: not a size_t array polyfuse can follow", node,
                           UnsupportedError)
    target = ev.mem.read(v)
    if isinstance(target, Arr):
        elems = [target.get(i) for i in range(dim)]
    elif v.path and isinstance(v.path[-1], int):
        arr = ev.mem.read(Ref(v.slot, v.path[:-1]))
        k = v.path[-1]
        elems = [arr.get(k + i) if isinstance(arr, Arr) else UNK for i in range(dim)]
    elif dim == 1:
        elems = [target]
    else:
        raise ev.ctx.error(f"{what}: {dim} dimensions but a single value", node)
    return tuple(ev.int_value(e, f"{what}[{i}]", node) for i, e in enumerate(elems))


@handler("clEnqueueNDRangeKernel")
def enqueue_nd_range_kernel(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    ks = kernel_object(ev, arg_at(args, 1), node)
    dim = ev.concrete(arg_at(args, 2), "work_dim", node)
    if dim not in (1, 2, 3):
        raise ev.ctx.error(f"clEnqueueNDRangeKernel: work_dim must be 1, 2 or 3, got {dim}",
                           node)
    offset = sizes(ev, arg_at(args, 3), dim, "global work offset", node)
    gsize = sizes(ev, arg_at(args, 4), dim, "global work size", node)
    if gsize is None:
        raise ev.ctx.error("clEnqueueNDRangeKernel: the global work size is NULL", node)
    lsize = sizes(ev, arg_at(args, 5), dim, "local work size", node)
    launch(ev, ks, dim, gsize, lsize, offset, node)
    return ZERO


@handler("clEnqueueTask")
def enqueue_task(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    ks = kernel_object(ev, arg_at(args, 1), node)
    one = (sympy.Integer(1),)
    launch(ev, ks, 1, one, one, None, node)
    return ZERO


def launch(ev: CEvaluator, ks: KState, dim: int, gsize: tuple, lsize: Optional[tuple],
           offset: Optional[tuple], node: c_ast.Node) -> None:
    """Record a :class:`Launch` of a kernel object with its current bindings."""
    kernel = ev.sources.kernels[ks.kernel]
    bound = ks.bound()
    missing = [p.index for p in kernel.params if p.index not in bound]
    if missing:
        names = ", ".join(f"{i} ({kernel.params[i].name})" for i in missing)
        raise ev.ctx.error(f"launch of kernel '{kernel.name}' with unset arguments: {names}",
                           node)
    for i, b in bound.items():
        if isinstance(b, Poison):
            if ks.kernel and ev.ctx.loops:
                raise NeedUnroll(f"argument {i} {b.reason}")
            raise ev.ctx.error(f"launch of kernel '{kernel.name}': argument {i} "
                               f"({kernel.params[i].name}) {b.reason}", node, UnsupportedError)
    ev.record(Launch(id=0, kernel=kernel.name, work_dim=dim, global_size=gsize,
                     local_size=lsize, args=tuple(bound[i] for i in sorted(bound)),
                     global_offset=offset, kernel_object=ks.var), node)


def byte_range(ev: CEvaluator, buf: str, off: Any, size: Any, node: c_ast.Node) -> BufferRange:
    """The bytes a transfer touches, checked against the buffer's size."""
    o = ev.int_value(off, "offset", node, required=False)
    s = ev.int_value(size, "size", node, required=False)
    if o is None:
        return BufferRange(buf)
    bsize = ev.mem.state.buffers[buf].size if buf in ev.mem.state.buffers else None
    for what, v in (("offset", o), ("end", None if s is None else o + s)):
        if v is None:
            continue
        below = sympy.simplify(v) if what == "offset" else None
        if below is not None and below.is_number and below < 0:
            raise ev.ctx.error(f"transfer on buffer '{buf}' starts at negative offset {v}",
                               node)
        if what == "end" and bsize is not None:
            over = sympy.simplify(v - bsize)
            if over.is_number and over > 0:
                raise ev.ctx.error(f"transfer on buffer '{buf}' reaches byte {v}, past the "
                                   f"end of the buffer ({bsize} bytes)", node)
    return BufferRange(buf, o, s)


def blocking(v: Any) -> bool:
    """Whether a ``blocking_*`` argument may be true (then the call synchronizes)."""
    return truth_of(v) is not False


def transfer(ev: CEvaluator, node: c_ast.FuncCall, args: list, *, call: str, rect: bool) -> Any:
    """``clEnqueue{Read,Write}Buffer[Rect]``: a host read or write of the bytes it moves (a
    rectangular transfer: the whole buffer, a safe over-approximation), synchronizing the
    queue when it blocks."""
    buf = buffer_arg(ev, arg_at(args, 1), call, node)
    rng = BufferRange(buf) if rect else \
        byte_range(ev, buf, arg_at(args, 3), arg_at(args, 4), node)
    if "Write" in call:
        ev.record(HostOp(id=0, kind="write", writes=(rng,), name=call), node)
    else:
        ev.record(HostOp(id=0, kind="read", reads=(rng,), name=call), node)
        read_back(ev, arg_at(args, 10 if rect else 5), call, node)
    if blocking(arg_at(args, 2)):
        sync(ev, call, node)
    return ZERO


@handler("clEnqueueCopyBuffer")
def enqueue_copy_buffer(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    src = buffer_arg(ev, arg_at(args, 1), "clEnqueueCopyBuffer source", node)
    dst = buffer_arg(ev, arg_at(args, 2), "clEnqueueCopyBuffer destination", node)
    size = arg_at(args, 5)
    ev.record(HostOp(id=0, kind="copy",
                     reads=(byte_range(ev, src, arg_at(args, 3), size, node),),
                     writes=(byte_range(ev, dst, arg_at(args, 4), size, node),),
                     name="clEnqueueCopyBuffer"), node)
    return ZERO


@handler("clEnqueueCopyBufferRect")
def enqueue_copy_buffer_rect(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    src = buffer_arg(ev, arg_at(args, 1), "clEnqueueCopyBufferRect source", node)
    dst = buffer_arg(ev, arg_at(args, 2), "clEnqueueCopyBufferRect destination", node)
    ev.record(HostOp(id=0, kind="copy", reads=(BufferRange(src),),
                     writes=(BufferRange(dst),), name="clEnqueueCopyBufferRect"), node)
    return ZERO


@handler("clEnqueueFillBuffer")
def enqueue_fill_buffer(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    buf = buffer_arg(ev, arg_at(args, 1), "clEnqueueFillBuffer", node)
    rng = byte_range(ev, buf, arg_at(args, 4), arg_at(args, 5), node)
    ev.record(HostOp(id=0, kind="write", writes=(rng,), name="clEnqueueFillBuffer"), node)
    return ZERO


@handler("clEnqueueMapBuffer")
def enqueue_map_buffer(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    succeed(ev, args)
    buf = buffer_arg(ev, arg_at(args, 1), "clEnqueueMapBuffer", node)
    fl = arg_at(args, 3)
    flags = int(fl.e) if isinstance(fl, Num) and fl.e.is_Integer else 3
    rng = byte_range(ev, buf, arg_at(args, 4), arg_at(args, 5), node)
    reads = (rng,) if flags & _CL_MAP_READ or not flags & _CL_MAP_WRITE_INVALIDATE else ()
    writes = (rng,) if flags & (_CL_MAP_WRITE | _CL_MAP_WRITE_INVALIDATE) else ()
    if not flags & (_CL_MAP_READ | _CL_MAP_WRITE | _CL_MAP_WRITE_INVALIDATE):
        reads = writes = (rng,)
    ev.record(HostOp(id=0, kind="write" if writes else "read", reads=reads, writes=writes,
                     name="clEnqueueMapBuffer"), node)
    if blocking(arg_at(args, 2)):
        sync(ev, "clEnqueueMapBuffer", node)
    sid = ev.mem.new_slot("mapped", CType("array", 0, elem=UNK_TYPE), Arr(None, (), UNK))
    return Ref(sid)


@handler("clFinish")
def finish(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    sync(ev, "clFinish", node)
    return ZERO


@handler("clWaitForEvents")
def wait_for_events(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    sync(ev, "clWaitForEvents", node)
    return ZERO


@handler("clCreateKernelsInProgram")
def create_kernels_in_program(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """One kernel object per kernel of the program, in source order (programs then find
    theirs by ``clGetKernelInfo(CL_KERNEL_FUNCTION_NAME)``); the count through the last
    argument."""
    names = list(ev.sources.program_kernels(arg_at(args, 0), node).items())
    count, out = arg_at(args, 3), arg_at(args, 2)
    if isinstance(count, Ref):
        ev.mem.write(count, Num(sympy.Integer(len(names))))
    if isinstance(out, Ref):
        if ev.ctx.loops:
            raise NeedUnroll("kernel objects are created inside a host loop")
        room = arg_at(args, 1)
        n = min(len(names), int(room.e)) if isinstance(room, Num) and room.e.is_Integer \
            else len(names)
        for i, (_, record_name) in enumerate(names[:n]):
            ref = ev.mem.index(out, Num(sympy.Integer(i)))
            if not isinstance(ref, Ref):
                raise ev.ctx.error("clCreateKernelsInProgram: the kernel array is not one "
                                   "polyfuse can follow", node, UnsupportedError)
            oid = ev.cl.new_kernel_object()
            var = f"{ev.ctx.name_hint or ev.mem.state.slots[out.slot].name}_{i}"
            ev.mem.state.kobjs[oid] = KState(var=var, kernel=record_name)
            ev.mem.write(ref, KObj(oid))
    elif not (isinstance(out, Num) and out.e == 0):
        raise ev.ctx.error("clCreateKernelsInProgram: the kernel array is not one polyfuse "
                           "can follow", node, UnsupportedError)
    return ZERO


@handler("clGetKernelInfo")
def get_kernel_info(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """``CL_KERNEL_FUNCTION_NAME`` and ``CL_KERNEL_NUM_ARGS`` of a kernel object are known;
    other queries are run-time values."""
    k, what, out = arg_at(args, 0), arg_at(args, 1), arg_at(args, 3)
    ret = arg_at(args, 4)
    if isinstance(k, KObj) and k.oid in ev.mem.state.kobjs and isinstance(what, Num):
        kernel = ev.sources.kernels[ev.mem.state.kobjs[k.oid].kernel]
        name = next((n for n, r in ev.sources.kernel_names() if r == kernel.name), kernel.name)
        if what.e == _CL_KERNEL_FUNCTION_NAME:
            if isinstance(out, Ref):
                ev.mem.texts[out.slot] = name
            if isinstance(ret, Ref):
                ev.mem.write(ret, Num(sympy.Integer(len(name) + 1)))
            return ZERO
        if what.e == _CL_KERNEL_NUM_ARGS and isinstance(out, Ref):
            ev.mem.write(out, Num(sympy.Integer(len(kernel.params))))
            return ZERO
    ev.mem.forget_through(args[1:])
    return ZERO


def read_back(ev: CEvaluator, ptr: Any, call: str, node: c_ast.Node) -> None:
    """Host memory a read from the device fills holds data polyfuse does not know (never
    its old value), named after the variable it is read into."""
    if isinstance(ptr, ElemPtr):  # into a std::vector's elements: none is known after it
        vec = ev.mem.read(ptr.of)
        if getattr(vec, "items", None) is not None:
            ev.mem.write(ptr.of, dataclasses.replace(vec, items=None))
        return
    if not isinstance(ptr, Ref):
        return
    value = Runtime(ev.source(f"read back from the device by {call}", node))
    cur = ev.mem.read(ptr)
    if isinstance(cur, Arr):
        ev.mem.write(ptr, Arr(cur.length, tuple((i, value) for i, _ in cur.elems), value))
    elif ptr.path and isinstance(ptr.path[-1], int) and ptr.path[-1] == 0 and \
            isinstance(ev.mem.read(Ref(ptr.slot, ptr.path[:-1])), Arr):
        arr = ev.mem.read(Ref(ptr.slot, ptr.path[:-1]))
        ev.mem.write(Ref(ptr.slot, ptr.path[:-1]),
                     Arr(arr.length, tuple((i, value) for i, _ in arr.elems), value))
    elif isinstance(cur, (Unknown, Num, Runtime)):
        ev.mem.write(ptr, value)


for _name, _call, _rect in (("clEnqueueWriteBuffer", "clEnqueueWriteBuffer", False),
                            ("clEnqueueReadBuffer", "clEnqueueReadBuffer", False),
                            ("clEnqueueWriteBufferRect", "clEnqueueWriteBufferRect", True),
                            ("clEnqueueReadBufferRect", "clEnqueueReadBufferRect", True)):
    HANDLERS[_name] = partial(transfer, call=_call, rect=_rect)


#: info queries a device answers with integers (``clGetDeviceInfo``,
#: ``clGetKernelWorkGroupInfo``), by the value of their ``CL_`` constant
_QUERIES = {
    0x1000: "CL_DEVICE_TYPE", 0x1001: "CL_DEVICE_VENDOR_ID",
    0x1002: "CL_DEVICE_MAX_COMPUTE_UNITS", 0x1003: "CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS",
    0x1004: "CL_DEVICE_MAX_WORK_GROUP_SIZE", 0x1005: "CL_DEVICE_MAX_WORK_ITEM_SIZES",
    **{code: f"CL_DEVICE_{kind}_VECTOR_WIDTH_{t}"  # a host picks a vector kernel by these
       for kind, codes in (("PREFERRED", (*range(0x1006, 0x100C), 0x1034)),
                           ("NATIVE", range(0x1036, 0x103D)))
       for code, t in zip(codes, ("CHAR", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE", "HALF"))},
    0x100C: "CL_DEVICE_MAX_CLOCK_FREQUENCY", 0x100D: "CL_DEVICE_ADDRESS_BITS",
    0x1010: "CL_DEVICE_MAX_MEM_ALLOC_SIZE", 0x1016: "CL_DEVICE_IMAGE_SUPPORT",
    0x1019: "CL_DEVICE_MEM_BASE_ADDR_ALIGN", 0x101B: "CL_DEVICE_SINGLE_FP_CONFIG",
    0x101D: "CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE", 0x101E: "CL_DEVICE_GLOBAL_MEM_CACHE_SIZE",
    0x101F: "CL_DEVICE_GLOBAL_MEM_SIZE", 0x1021: "CL_DEVICE_MAX_CONSTANT_ARGS",
    0x1022: "CL_DEVICE_LOCAL_MEM_TYPE", 0x1032: "CL_DEVICE_DOUBLE_FP_CONFIG",
    0x1020: "CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE", 0x1023: "CL_DEVICE_LOCAL_MEM_SIZE",
    0x11B0: "CL_KERNEL_WORK_GROUP_SIZE", 0x11B1: "CL_KERNEL_COMPILE_WORK_GROUP_SIZE",
    0x11B2: "CL_KERNEL_LOCAL_MEM_SIZE", 0x11B3: "CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE",
}
#: device queries answered with text (a host searches the extension list for ``cl_khr_fp64``)
_TEXT_QUERIES = {
    0x102B: "CL_DEVICE_NAME", 0x102C: "CL_DEVICE_VENDOR", 0x102D: "CL_DRIVER_VERSION",
    0x102E: "CL_DEVICE_PROFILE", 0x102F: "CL_DEVICE_VERSION", 0x1030: "CL_DEVICE_EXTENSIONS",
    0x103D: "CL_DEVICE_OPENCL_C_VERSION",
}


def query_code(name: str) -> Optional[int]:
    """The value of a ``CL_DEVICE_*``/``CL_KERNEL_*`` query polyfuse answers, by its name (the
    C++ wrapper's ``getInfo<CL_DEVICE_TYPE>()`` names it as a template argument)."""
    return next((code for table in (_QUERIES, _TEXT_QUERIES) for code, n in table.items()
                 if n == name), None)


@handler("clGetDeviceInfo", "clGetKernelWorkGroupInfo")
def info_query(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """A device or kernel limit: the answer of the device the program is analysed for (said in
    a warning), else a run-time value named after the variable it is stored in."""
    name = node.name.name
    kernel_query = name == "clGetKernelWorkGroupInfo"
    first = 2 if kernel_query else 1
    param, out = arg_at(args, first), arg_at(args, first + 2)
    code = int(param.e) if isinstance(param, Num) and param.e.is_Integer else None
    answer = None
    queries = ev.cl.queries
    if queries is not None and not kernel_query and code in _TEXT_QUERIES:
        text = queries.device_info(code)
        if isinstance(text, str):
            return _text_answer(ev, node, code, text, out, arg_at(args, first + 3))
    if queries is not None and code in _QUERIES and isinstance(out, Ref):
        if kernel_query:
            k = arg_at(args, 0)
            kernel = ev.sources.kernels.get(ev.mem.state.kobjs[k.oid].kernel) if isinstance(
                k, KObj) and k.oid in ev.mem.state.kobjs else None
            answer = queries.kernel_info(code, kernel) if kernel is not None else None
        else:
            answer = queries.device_info(code)
    ev.mem.forget_through(args[first + 3:first + 4])
    if answer is None:
        src = ev.source(f"queried from the device by {name}", node)
        cur = ev.mem.read(out) if isinstance(out, Ref) else None
        if isinstance(cur, (Unknown, Num, Runtime)):
            ev.mem.write(out, Runtime(src))
        elif isinstance(cur, Arr):  # CL_DEVICE_MAX_WORK_ITEM_SIZES into an array
            ev.mem.write(out, Arr(cur.length, (), Unknown(False, src)))
        return ZERO
    ev.ctx.warn(f"{name}({_QUERIES[code]}) answered by the device that verifies the program "
                f"({queries.name}): {answer!r}", node)
    if _QUERIES[code] == "CL_DEVICE_IMAGE_SUPPORT" and answer:
        loc = ev.ctx.loc(node)
        ev.cl.image_support_at = f"{loc.file}:{loc.line}" if loc else ev.ctx.filename
    ret = arg_at(args, first + 3)
    values = answer if isinstance(answer, tuple) else (answer,)
    for i, v in enumerate(values):
        at = ev.mem.index(out, Num(sympy.Integer(i)))
        if isinstance(at, Ref):
            ev.mem.write(at, Num(sympy.Integer(v)))
    size = arg_at(args, first + 1)
    nbytes = 8 * len(values) if isinstance(answer, tuple) else \
        int(size.e) if isinstance(size, Num) and size.e.is_Integer else 8
    if isinstance(ret, Ref):
        ev.mem.write(ret, Num(sympy.Integer(nbytes)))
    return ZERO


def _text_answer(ev: CEvaluator, node: c_ast.FuncCall, code: int, text: str, out: Value,
                 size_out: Value) -> Value:
    """A text query answered by the device: the text into the buffer (when one is given) and
    its size with the terminating NUL (the size query a host allocates by)."""
    ev.ctx.warn(f"clGetDeviceInfo({_TEXT_QUERIES[code]}) answered by the device that verifies "
                f"the program ({ev.cl.queries.name}): {text!r}", node)
    cur = ev.mem.read(out) if isinstance(out, Ref) and not out.path else None
    if isinstance(cur, Str):  # a std::string's characters (`&s[0]`), the NUL included
        data = text + "\0"
        ev.mem.write(out, Str(data + cur.s[len(data):]) if len(data) <= len(cur.s) else UNK)
    elif isinstance(out, Ref) and out.path in ((), (0,)):
        ev.mem.set_text(out.slot, text)
    elif isinstance(out, Ref):  # a buffer inside a record: its text is not tracked
        ev.mem.forget_through([out])
    if isinstance(size_out, Ref):
        ev.mem.write(size_out, Num(sympy.Integer(len(text.encode()) + 1)))
    return ZERO


@handler("clGetPlatformIDs", "clGetDeviceIDs")
def enumerate_devices(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """How many platforms and devices there are: when a device verifies the program, the
    host is analysed as it runs with that device alone (one platform, one device, found by
    a type filter that takes it: ``clGetDeviceIDs`` of another type finds none); else a
    run-time value.  The handles stored are run-time values either way."""
    name = node.name.name
    queries = ev.cl.queries
    platforms = name == "clGetPlatformIDs"
    ids, count = (arg_at(args, 1), arg_at(args, 2)) if platforms else \
        (arg_at(args, 3), arg_at(args, 4))
    dtype = queries.device_info(0x1000) if queries is not None and not platforms else None
    want = arg_at(args, 1)
    if queries is None or not platforms and not (
            isinstance(dtype, int) and isinstance(want, Num) and want.e.is_Integer):
        return _boilerplate(ev, node, args)
    # CL_DEVICE_TYPE_DEFAULT (1) takes the one device there is
    found = platforms or int(want.e) in (1, 0xFFFFFFFF) or bool(int(want.e) & dtype)
    src = ev.source(f"queried from the device by {name}", node)
    ev.mem.forget_through([ids], Runtime(src))
    if isinstance(count, Ref):
        ev.mem.write(count, Num(sympy.Integer(int(found))))
    if isinstance(count, Ref) or not found:  # (a call that only takes the first says nothing)
        ev.ctx.warn(f"{name} answered as the device that verifies the program "
                    f"({queries.name}) alone would: {int(found)} found", node)
    return ZERO if found else Num(sympy.Integer(-1))  # CL_DEVICE_NOT_FOUND


#: the position of the ``cl_event *event`` argument of each enqueue call
_EVENT_ARG = {
    "clEnqueueNDRangeKernel": 8, "clEnqueueTask": 4, "clEnqueueReadBuffer": 8,
    "clEnqueueWriteBuffer": 8, "clEnqueueReadBufferRect": 13, "clEnqueueWriteBufferRect": 13,
    "clEnqueueCopyBuffer": 8, "clEnqueueCopyBufferRect": 12, "clEnqueueFillBuffer": 8,
    "clEnqueueMapBuffer": 8, "clEnqueueUnmapMemObject": 5, "clEnqueueMarkerWithWaitList": 3,
    "clEnqueueBarrierWithWaitList": 3, "clEnqueueMarker": 1, "clEnqueueMigrateMemObjects": 6,
}
_CL_EVENT_COMMAND_EXECUTION_STATUS = 0x11D3
_EVENT = Handle("cl_event")


def _gives_event(fn: Handler, index: int) -> Handler:
    """``fn``, then the event it returns through its ``event`` argument: a non-NULL handle
    (``if (ev != 0)`` after an enqueue is then decided, as it is when the program runs)."""
    def call(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
        value = fn(ev, node, args)
        out = arg_at(args, index)
        # the C call itself (the C++ wrapper's methods pass their own argument lists)
        if isinstance(out, Ref) and isinstance(node, c_ast.FuncCall) and \
                isinstance(node.name, c_ast.ID) and node.name.name in _EVENT_ARG:
            ev.mem.write(out, _EVENT)
        return value
    return call


@handler("clGetEventInfo")
def get_event_info(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """An enqueued command's execution status is ``CL_COMPLETE``: polyfuse models an in-order
    queue whose commands have completed when the host looks (a loop that polls the status
    until then ends), so the query is a synchronisation; other event queries are run-time
    values."""
    param, out = arg_at(args, 1), arg_at(args, 3)
    if arg_at(args, 0) == _EVENT and isinstance(param, Num) and \
            param.e == _CL_EVENT_COMMAND_EXECUTION_STATUS and isinstance(out, Ref):
        ev.ctx.warn("clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS) taken as CL_COMPLETE "
                    "(the command has run when the host looks)", node)
        sync(ev, "clGetEventInfo", node)
        ev.mem.write(out, ZERO)
        return ZERO
    return _boilerplate(ev, node, args)


#: calls that change nothing polyfuse models (platforms, devices, contexts, queues, info
#: queries, retain/release, flushes, barriers and markers of an in-order queue)
_BOILERPLATE = {
    "clGetPlatformIDs", "clGetPlatformInfo", "clGetDeviceIDs",
    "clGetDeviceInfo", "clRetainDevice", "clReleaseDevice", "clCreateContext",
    "clCreateContextFromType", "clRetainContext", "clReleaseContext", "clGetContextInfo",
    "clCreateCommandQueue", "clCreateCommandQueueWithProperties", "clRetainCommandQueue",
    "clReleaseCommandQueue", "clGetCommandQueueInfo", "clRetainMemObject", "clReleaseMemObject",
    "clGetMemObjectInfo", "clCreateProgramWithSource", "clCreateProgramWithBinary",
    "clRetainProgram", "clReleaseProgram", "clBuildProgram", "clCompileProgram",
    "clGetProgramInfo", "clGetProgramBuildInfo", "clRetainKernel", "clReleaseKernel",
    "clGetKernelInfo", "clGetKernelWorkGroupInfo", "clCreateUserEvent",
    "clRetainEvent", "clReleaseEvent", "clSetUserEventStatus", "clGetEventProfilingInfo",
    "clFlush", "clEnqueueMarkerWithWaitList", "clEnqueueBarrierWithWaitList", "clEnqueueMarker",
    "clEnqueueBarrier", "clEnqueueWaitForEvents", "clEnqueueUnmapMemObject",
    "clEnqueueMigrateMemObjects",
}


#: calls that return a handle polyfuse does not follow (contexts, queues, user events)
_CREATES_HANDLE = {
    "clCreateContext", "clCreateContextFromType", "clCreateCommandQueue",
    "clCreateCommandQueueWithProperties", "clCreateProgramWithSource", "clCreateProgramWithBinary",
    "clCreateUserEvent",
}


def _creates_handle(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    succeed(ev, args)
    return Handle(node.name.name)


def _boilerplate(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """Nothing to model; what an info query (``clGet*``) stores is a run-time value."""
    if node.name.name.startswith("clGet"):
        src = ev.source(f"queried from the device by {node.name.name}", node)
        ev.mem.forget_through(args[1:], Runtime(src))
    return ZERO


for _names, _handler in ((_CREATES_HANDLE, _creates_handle), (_BOILERPLATE, _boilerplate)):
    for _name in sorted(_names):
        HANDLERS.setdefault(_name, _handler)
for _name, _index in _EVENT_ARG.items():
    HANDLERS[_name] = _gives_event(HANDLERS[_name], _index)
