"""The program model: immutable records shared by every stage.

Data flows one way: a front-end (OpenCL C + C host, ONNX, the Python builder) produces a
:class:`Program`; the UAR reads it; planning and code generation produce new records.  Records are
frozen dataclasses; a transformation returns a new record (``dataclasses.replace``), never mutates.

Conventions (relied on by every stage):

* **Kernel-level instances.**  A statement of a kernel runs at
  ``S[g0, g1, g2, l0, l1, l2, k...]``: group ids and local ids for all three NDRange dimensions
  (dimensions the launch does not use are pinned to 0 when it is instantiated), then the kernel's
  own loop iterators, outermost first.  The isl tuple name of a statement's domain is its ``id``.
* **Kernel-level parameters.**  Scalar kernel arguments keep their C names as isl parameters.
  Launch geometry that is not known when the kernel is extracted appears as the parameters
  ``_gs0.._gs2`` (global size) and ``_ls0.._ls2`` (local size); C reserves leading underscores, so
  they never clash with user names.  With a known local size ``L`` the global id is ``g*L + l``
  (affine); with an unknown one it is ``g*_ls + l``, which is not affine, so subscripts that use it
  are over-approximated (see :mod:`polyfuse.frontend.opencl`).
* **Host expressions** (sizes, scalar arguments, loop bounds) are sympy expressions over host
  parameters (values read at run time, e.g. ``atoi(argv[1])``) and enclosing host-loop iterators.
  :func:`host_expr_to_isl` turns an affine one into isl syntax.
* **Launch-level instances** (the UAR's work-items) are ``L<id>[h..., g0.., l0..]`` with one ``h``
  per enclosing host loop and one ``g``/``l`` per used NDRange dimension (``work_dim``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Optional, Protocol, Union

import islpy as isl
import sympy

#: Work-item functions of OpenCL C that the front-end models exactly.
WORK_ITEM_FUNCTIONS = (
    "get_global_id",
    "get_local_id",
    "get_group_id",
    "get_local_size",
    "get_num_groups",
    "get_global_size",
    "get_global_offset",
    "get_work_dim",
)

#: isl names of the work-item dimensions, in order, at kernel level.
GROUP_DIMS = ("g0", "g1", "g2")
LOCAL_DIMS = ("l0", "l1", "l2")
WORK_ITEM_DIMS = GROUP_DIMS + LOCAL_DIMS

#: isl parameter names for launch geometry unknown at extraction time.
GLOBAL_SIZE_PARAMS = ("_gs0", "_gs1", "_gs2")
LOCAL_SIZE_PARAMS = ("_ls0", "_ls1", "_ls2")
#: isl parameter names for a launch's global work offset when it is not a known integer.
GLOBAL_OFFSET_PARAMS = ("_go0", "_go1", "_go2")

class PolyfuseError(Exception):
    """An error in the user's input, reported as one line naming the place.

    ``str(err)`` is ``file:line: message`` (or ``file: message`` / ``message`` when the place is
    not known).  The CLI prints exactly that, and exits with status 1.
    """

    def __init__(self, message: str, file: Optional[str] = None, line: Optional[int] = None):
        self.message = message
        self.file = file
        self.line = line
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}: {self.message}"
        if self.file:
            return f"{self.file}: {self.message}"
        return self.message


class UnsupportedError(PolyfuseError):
    """A construct polyfuse does not handle (and refuses rather than guessing)."""


class RegisterTile(NamedTuple):
    """One tile of the register-tiled matrix product (``gpu`` variant): an ``edge x edge``
    work-group computes a ``(edge * wm) x (edge * wn)`` output tile, each work-item a strided
    ``wm x wn`` register tile, staging ``tk``-deep panels of A and B in ``__local`` memory."""

    edge: int
    wm: int
    wn: int
    tk: int = 16

    def __str__(self) -> str:
        return f"{self.edge}:{self.wm}x{self.wn}k{self.tk}"


@dataclass(frozen=True)
class KernelVariant:
    """How the ONNX operator kernels (:mod:`polyfuse.oplib`) are laid out.

    ``tiled`` is what planning and the checked-in schedules use (one output per work-item, wide
    work-groups: fuses best); ``blocked`` fits CPU-like devices (register-blocked matrix
    products, a row of Softmax, LayerNormalization or trailing Reduce* per work-item); ``gpu``
    fits GPUs (``__local`` tiles shared by a work-group plus a register tile per work-item,
    coalesced).  :class:`polyfuse.InferenceSession`
    chooses among the forms that suit the device.  It travels in the :class:`Target` the
    front-end is given, so nothing global steers the kernels.
    """

    name: str = "tiled"
    #: the matrix-product kernel MatMul and Gemm get: ``"tiled"`` (``__local`` tiles, one
    #: output per work-item), ``"blocked"`` (a block of outputs per work-item in registers) or
    #: ``"register_tiled"`` (``__local`` tiles and a strided register tile per work-item)
    product_form: str = "tiled"
    #: upper bound on the lanes of a row reduction (few on devices that loop over a work-group)
    reduction_lanes: int = 128
    #: Softmax, LayerNormalization and Reduce* over trailing axes as one work-item per row,
    #: no ``__local`` memory and no barrier, each pass over the row a loop into this many
    #: partial results the compiler keeps in vector registers (CPUs run a work-group's
    #: barriers as loops); 0: a work-group of lanes per row with a ``__local`` tree
    row_accumulators: int = 0
    #: columns per work-item of the blocked product (a device's: two native float vectors)
    block_cols: int = 32
    #: the device's native float vector width: the blocked product loads B's rows and keeps
    #: its accumulators in OpenCL vectors this wide (1: named scalars, left to the compiler's
    #: vectorizer, which LLVM's AVX-512 CPUs' tuning keeps at 256 bits)
    vector_width: int = 1
    #: work-groups that keep the device busy (its compute units): the register-tiled product
    #: takes the register tile with the most reuse that still gives it most of this many
    device_groups: int = 1
    #: the register-tiled product's tile, fixed (:class:`RegisterTile`), or None to choose
    #: from the shape and ``device_groups`` (:func:`polyfuse.oplib.linalg.register_tile_shape`)
    register_tile: Optional[RegisterTile] = None
    #: measured choices of the register-tiled product: ``((m, n, k, batch), tile)`` pairs
    #: (:func:`polyfuse.runtime.product_tiles.tune_product_tiles`), before the rule
    tiles: tuple[tuple[tuple[int, int, int, int], RegisterTile], ...] = ()
    #: longest Reduce* over leading axes generated as one looping work-item per output
    #: (coalesced, no barrier, fuses with element-wise consumers) instead of a work-group per
    #: output; 0: never.  Split-K products (``gpu`` and ``blocked``) end in such a sum
    reduction_loop_max: int = 0


#: the kernel variants by name (:meth:`Target.with_variant`)
KERNEL_VARIANTS: dict[str, KernelVariant] = {
    "tiled": KernelVariant(),
    "blocked": KernelVariant(name="blocked", product_form="blocked", reduction_lanes=8,
                             row_accumulators=16, reduction_loop_max=64),
    "gpu": KernelVariant(name="gpu", product_form="register_tiled", reduction_loop_max=64),
}


@dataclass(frozen=True)
class Target:
    """What planning and code generation need to know of a device, without the device.

    Only :mod:`polyfuse.runtime` talks to OpenCL; it builds a ``Target`` from a device
    (:func:`polyfuse.runtime.device.device_target`) and the device-free stages take one as an
    argument.  The default is the reference device the checked-in schedules are computed for: the
    limits every OpenCL device offers in practice (256 work-items, 32 KiB of ``__local`` memory).
    """

    name: str = "reference"
    max_work_group_size: int = 256
    local_mem_size: int = 32768
    max_work_item_sizes: tuple[int, ...] = (256, 256, 256)
    #: sub-group (warp / SIMD) width, ``None`` when the device does not say
    sub_group_size: Optional[int] = None
    preferred_work_group_size_multiple: Optional[int] = None
    preferred_vector_width: int = 1
    extensions: frozenset[str] = frozenset()
    is_cpu: bool = False
    #: the layout of generated operator kernels (ONNX front-end)
    kernel: KernelVariant = KernelVariant()

    def with_variant(self, name: str) -> Target:
        """This target generating kernels of variant ``name`` (:data:`KERNEL_VARIANTS`); the
        device's block width, vector width and work-group count are kept."""
        if name not in KERNEL_VARIANTS:
            raise ValueError(f"unknown kernel variant {name!r}; known: {sorted(KERNEL_VARIANTS)}")
        return replace(self, kernel=replace(KERNEL_VARIANTS[name],
                                            block_cols=self.kernel.block_cols,
                                            vector_width=self.kernel.vector_width,
                                            device_groups=self.kernel.device_groups))

    def with_tiles(self, tiles: tuple[tuple[tuple[int, int, int, int], RegisterTile], ...]
                   ) -> Target:
        """This target with measured register tiles (:attr:`KernelVariant.tiles`)."""
        return replace(self, kernel=replace(self.kernel, tiles=tuple(sorted(tiles))))

    @property
    def simd_width(self) -> Optional[int]:
        """The width work-items execute in lock-step: the sub-group size, else the preferred
        work-group size multiple."""
        return self.sub_group_size or self.preferred_work_group_size_multiple


#: the device-free default (see :class:`Target`)
REFERENCE_TARGET = Target()


class DeviceQueries(Protocol):
    """A device's answers to a host's info queries (``clGetDeviceInfo``,
    ``clGetKernelWorkGroupInfo``), for a program analysed for that device (``fuse --verify``:
    the device that verifies it): an integer, integers (``CL_DEVICE_MAX_WORK_ITEM_SIZES``) or
    text (``CL_DEVICE_EXTENSIONS``); ``None`` where the device gives no answer.  Only
    :mod:`polyfuse.runtime` makes one (:func:`polyfuse.runtime.execute.device_queries`)."""

    name: str

    def device_info(self, param: int) -> Optional[Union[int, str, tuple[int, ...]]]:
        """The answer to ``clGetDeviceInfo(param)``."""

    def kernel_info(self, param: int, kernel: Kernel) -> Optional[Union[int, tuple[int, ...]]]:
        """The answer to ``clGetKernelWorkGroupInfo(param)`` for ``kernel`` built as the
        host builds it."""


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int
    column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelParam:
    """A kernel parameter.  For pointers ``type`` is the element type (``float``, ``float4``)."""

    name: str
    index: int
    type: str
    pointer: bool
    address_space: str = "private"
    const: bool = False

    @property
    def is_buffer(self) -> bool:
        return self.pointer and self.address_space in ("global", "constant")


@dataclass(frozen=True)
class ArrayDecl:
    """An array declared inside a kernel (``__local`` tile or private array)."""

    name: str
    type: str
    shape: tuple[int, ...]
    address_space: str
    loc: Optional[SourceLoc] = None


@dataclass(frozen=True)
class Access:
    """One memory access of a statement.

    ``relation`` maps the statement's instances to array elements (``array[i]`` or, for
    multi-dimensional local/private arrays, ``array[i, j]``); element indices are in units of the
    array's element type.  ``exact`` is False for may-accesses (non-affine or data-dependent
    subscripts, non-affine guards); ``reason`` says why.
    """

    array: str
    address_space: str
    direction: str  # "read" | "write"
    relation: isl.Map
    exact: bool = True
    reason: Optional[str] = None
    loc: Optional[SourceLoc] = None
    dtype: str = "float"


@dataclass(frozen=True)
class Statement:
    """A leaf statement (assignment, expression, declaration with initializer) of a kernel."""

    id: str
    domain: isl.Set
    accesses: tuple[Access, ...]
    code: str
    loc: Optional[SourceLoc] = None
    #: position in the kernel's syntax tree, for the original (textual) order
    order: tuple[int, ...] = ()
    #: False when the statement sits under a condition polyfuse cannot model exactly
    exact_domain: bool = True
    node: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Barrier:
    """A ``barrier(...)`` call: fences, where it runs, and whether all work-items reach it."""

    id: str
    domain: isl.Set
    fences: frozenset[str]
    loc: Optional[SourceLoc] = None
    order: tuple[int, ...] = ()
    #: True unless the barrier sits under control flow that depends on the work-item
    uniform: bool = True


@dataclass(frozen=True)
class KernelContext:
    """What was known when a kernel was extracted: the values it was specialized for."""

    local_size: tuple[Optional[int], Optional[int], Optional[int]] = (None, None, None)
    global_size: tuple[Optional[int], Optional[int], Optional[int]] = (None, None, None)
    values: tuple[tuple[str, int], ...] = ()  # known scalar arguments, sorted by name
    #: the launch's global work offset per dimension (None: not a known integer, a parameter)
    global_offset: tuple[Optional[int], Optional[int], Optional[int]] = (0, 0, 0)

    @property
    def value_map(self) -> dict[str, int]:
        return dict(self.values)


@dataclass(frozen=True)
class Kernel:
    """A ``__kernel`` function with its polyhedral model.

    ``statements`` and ``barriers`` are in textual order.  ``schedule`` maps every statement and
    barrier instance to its position in one work-item's execution (loops interleaved with the
    textual positions, 2d+1 style), so it also orders barriers against statements.
    """

    name: str
    params: tuple[KernelParam, ...]
    statements: tuple[Statement, ...]
    barriers: tuple[Barrier, ...] = ()
    arrays: tuple[ArrayDecl, ...] = ()
    #: number of NDRange dimensions the kernel refers to (0 if it uses no work-item function)
    work_dims: int = 1
    #: names of the work-item functions the kernel calls
    uses: frozenset[str] = frozenset()
    context: KernelContext = KernelContext()
    schedule: Optional[isl.UnionMap] = None
    source: str = ""
    loc: Optional[SourceLoc] = None
    #: messages about over-approximations made while extracting the model
    notes: tuple[str, ...] = ()
    #: options of the program build the kernel came from: the ``-D``/``-I`` its source was
    #: preprocessed with and the compiler options (``-cl-*``, ``-w``, ``-Werror``) the runtime
    #: reproduces (see :func:`runtime_options`)
    build_options: tuple[str, ...] = ()
    #: the pycparser ``FuncDef`` (OpenCL qualifiers kept as ``[[ocl::...]]`` attributes)
    ast: Any = field(default=None, compare=False, repr=False)
    #: the function definitions of the kernel's translation unit by name (``FuncDef``; the
    #: kernel's own among them): what it may call, emitted with it
    helpers: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: file-scope declarations of its translation unit (typedefs, structs, constant tables;
    #: pycparser nodes), emitted before it
    declarations: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    #: bytes of the struct types its translation unit declares, by name
    struct_sizes: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def param(self, name_or_index: Union[str, int]) -> KernelParam:
        for p in self.params:
            if p.name == name_or_index or p.index == name_or_index:
                return p
        raise KeyError(name_or_index)

    @property
    def accesses(self) -> tuple[Access, ...]:
        return tuple(a for s in self.statements for a in s.accesses)


def runtime_options(options: Iterable[str]) -> tuple[str, ...]:
    """The compiler options among build options (``-cl-*``, ``-w``, ``-Werror``): what changes
    the code a device compiler generates from already preprocessed source."""
    return tuple(o for o in options if o.startswith("-cl-") or o in ("-w", "-Werror"))


def shared_runtime_options(kernels: Iterable[Kernel]) -> tuple[str, ...]:
    """The :func:`runtime_options` every one of ``kernels`` was built with: what one program
    holding them all (unfused or fused) can be built with."""
    per_kernel = [runtime_options(k.build_options) for k in kernels]
    if not per_kernel:
        return ()
    return tuple(o for o in dict.fromkeys(per_kernel[0])
                 if all(o in opts for opts in per_kernel[1:]))


def preprocessor_options(options: Iterable[str]
                         ) -> tuple[dict[str, Optional[str]], list[str]]:
    """(defines, include directories) of build options as :func:`runtime_options` leaves them."""
    defines: dict[str, Optional[str]] = {}
    include_dirs: list[str] = []
    for o in options:
        if o.startswith("-D"):
            name, sep, value = o[2:].partition("=")
            defines[name] = value if sep else None
        elif o.startswith("-I"):
            include_dirs.append(o[2:])
    return defines, include_dirs


# ----------------------------------------------------------------------------------------------
# Host program
# ----------------------------------------------------------------------------------------------

HostExpr = sympy.Expr


@dataclass(frozen=True)
class HostLoop:
    """A counted host ``for`` loop: ``for (it = lower; it < upper; it += step)``."""

    iterator: str
    lower: HostExpr
    upper: HostExpr  # exclusive
    step: int = 1
    loc: Optional[SourceLoc] = None


@dataclass(frozen=True)
class Buffer:
    """A device buffer, named by the host variable that holds it.

    A sub-buffer (``clCreateSubBuffer``) or an alias has ``parent`` set and ``origin`` (bytes)
    into it; :meth:`Program.root` resolves the chain.
    """

    name: str
    size: Optional[HostExpr] = None  # bytes
    parent: Optional[str] = None
    origin: HostExpr = sympy.Integer(0)  # bytes into parent
    flags: tuple[str, ...] = ()
    dtype: Optional[str] = None  # element type when known (ONNX, builder)
    loc: Optional[SourceLoc] = None


@dataclass(frozen=True)
class ArgBinding:
    """What a kernel argument is bound to at a launch.

    ``kind`` is ``buffer`` (``buffer`` names a :class:`Buffer`), ``scalar`` (``value`` is a host
    expression, or None when not affine/known: then the kernel parameter stays symbolic) or
    ``local`` (``clSetKernelArg(k, i, bytes, NULL)``: a ``__local`` buffer of ``local_bytes``).
    ``origin`` says where a scalar value polyfuse does not know comes from (a read-back from
    the device, a data file), so that a refusal can name it.
    """

    index: int
    kind: str
    buffer: Optional[str] = None
    value: Optional[HostExpr] = None
    local_bytes: Optional[HostExpr] = None
    loc: Optional[SourceLoc] = None
    origin: str = field(default="", compare=False)


#: ``<parameter>__L<launch id>``: the name of an argument's value polyfuse does not know
_UNKNOWN_ARG = re.compile(r"^(?P<param>.+)__L(?P<launch>\d+)$")


def unknown_arg(launch_id: int, param: str) -> sympy.Symbol:
    """The value of scalar argument ``param`` of launch ``launch_id`` where the host's value is
    not known (``ArgBinding.value`` None).

    Named per launch: two launches' unknown arguments are different values even when their
    parameters share a name (``scale(a, n)`` and ``shift(b, n)`` given two values read at run
    time), so a fused kernel keeps one parameter for each.  Host variables never look like
    this (``__`` is reserved in C++ and the host front-end does not make such names).
    """
    return sympy.Symbol(f"{param}__L{launch_id}")


def unknown_arg_param(expr: Any) -> Optional[str]:
    """The kernel parameter an :func:`unknown_arg` stands for (None for any other expression):
    the name ``--param`` gives it a value by."""
    m = _UNKNOWN_ARG.match(str(expr)) if isinstance(expr, sympy.Symbol) else None
    return m.group("param") if m else None


@dataclass(frozen=True)
class Launch:
    """One ``clEnqueueNDRangeKernel`` call site; its instances are indexed by ``loops``."""

    id: int
    kernel: str
    work_dim: int
    global_size: tuple[HostExpr, ...]
    local_size: Optional[tuple[HostExpr, ...]]  # None: chosen by the implementation
    args: tuple[ArgBinding, ...]
    loops: tuple[HostLoop, ...] = ()
    global_offset: Optional[tuple[HostExpr, ...]] = None
    loc: Optional[SourceLoc] = None
    #: the host variable holding the cl_kernel object
    kernel_object: Optional[str] = None

    def arg(self, index: int) -> ArgBinding:
        for a in self.args:
            if a.index == index:
                return a
        raise KeyError(index)

    def scalar_value(self, b: ArgBinding, param: str) -> sympy.Expr:
        """The host expression scalar argument ``b`` (of parameter ``param``) holds: its value,
        or this launch's own :func:`unknown_arg` where polyfuse does not know it."""
        return sympy.sympify(b.value) if b.value is not None else unknown_arg(self.id, param)


@dataclass(frozen=True)
class BufferRange:
    """Bytes ``[offset, offset + size)`` of a buffer (size None: to the end)."""

    buffer: str
    offset: HostExpr = sympy.Integer(0)
    size: Optional[HostExpr] = None


@dataclass(frozen=True)
class HostOp:
    """A host statement with memory effects or synchronization.

    ``kind``: ``write`` (clEnqueueWriteBuffer / fill / map-for-write: host → device), ``read``
    (device → host), ``copy`` (device → device), ``unknown`` (a call polyfuse does not know that
    receives buffers: read and written entirely), ``sync`` (clFinish, clWaitForEvents, blocking
    calls: no memory effect, a virtual dependence).
    """

    id: int
    kind: str
    reads: tuple[BufferRange, ...] = ()
    writes: tuple[BufferRange, ...] = ()
    loops: tuple[HostLoop, ...] = ()
    name: str = ""  # the C function called
    loc: Optional[SourceLoc] = None


Operation = Union[Launch, HostOp]


@dataclass(frozen=True)
class Program:
    """A whole program: kernels, buffers, and host operations in host order.

    ``ops`` interleaves :class:`Launch` and :class:`HostOp` in program order; ids are unique
    across both.  ``params`` are the symbolic host values with ``context`` (an isl set string over
    them, e.g. ``"[n] -> { : n >= 1 }"``) stating what is known about them.
    """

    kernels: Mapping[str, Kernel]
    buffers: Mapping[str, Buffer]
    ops: tuple[Operation, ...]
    params: tuple[str, ...] = ()
    context: str = "{ : }"
    name: str = "program"
    files: tuple[str, ...] = ()
    #: initial contents of root buffers by name (e.g. an ONNX model's weights): every run starts
    #: from them unless told otherwise, so results use the real data, not random stand-ins
    data: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def launches(self) -> tuple[Launch, ...]:
        return tuple(op for op in self.ops if isinstance(op, Launch))

    @property
    def host_ops(self) -> tuple[HostOp, ...]:
        return tuple(op for op in self.ops if isinstance(op, HostOp))

    def op(self, op_id: int) -> Operation:
        for op in self.ops:
            if op.id == op_id:
                return op
        raise KeyError(op_id)

    def root(self, buffer: str) -> tuple[str, HostExpr]:
        """The root buffer behind ``buffer`` and the byte offset into it."""
        offset: HostExpr = sympy.Integer(0)
        seen = set()
        while True:
            b = self.buffers[buffer]
            if b.parent is None:
                return b.name, sympy.simplify(offset)
            if buffer in seen:
                raise PolyfuseError(f"buffer {buffer!r} aliases itself", *where(b.loc))
            seen.add(buffer)
            offset = offset + b.origin
            buffer = b.parent


def where(loc: Optional[SourceLoc]) -> tuple[Optional[str], Optional[int]]:
    """``(file, line)`` of a location, the last arguments of :class:`PolyfuseError`."""
    return (loc.file, loc.line) if loc else (None, None)


def host_expr_to_isl(expr: HostExpr) -> str:
    """isl syntax of an affine (or floor-divided) host expression; raises ValueError otherwise."""
    expr = sympy.sympify(expr)
    poly_vars = sorted(expr.free_symbols, key=str)
    if not poly_vars:
        if not expr.is_integer:
            raise ValueError(f"not an integer: {expr}")
        return str(int(expr))
    try:
        poly = sympy.Poly(expr, *poly_vars)
    except sympy.PolynomialError:
        return _floor_expr_to_isl(expr)
    if poly.total_degree() > 1:
        raise ValueError(f"not affine: {expr}")
    terms = []
    for monom, coeff in poly.terms():
        if not coeff.is_integer:
            raise ValueError(f"non-integer coefficient in {expr}")
        name = "*".join(str(v) for v, e in zip(poly_vars, monom) if e)
        terms.append(f"{int(coeff)}*{name}" if name else str(int(coeff)))
    return " + ".join(f"({t})" for t in terms) or "0"


def _floor_expr_to_isl(expr: HostExpr) -> str:
    if isinstance(expr, (sympy.Min, sympy.Max)):  # a guarded host loop's bound
        fn = "min" if isinstance(expr, sympy.Min) else "max"
        text = host_expr_to_isl(expr.args[0])
        for a in expr.args[1:]:
            text = f"{fn}({text}, {host_expr_to_isl(a)})"
        return text
    if isinstance(expr, sympy.floor):
        inner = expr.args[0]
        num, den = sympy.fraction(sympy.together(inner))
        if den.is_Integer and int(den) > 0:
            return f"floor(({host_expr_to_isl(num)})/{int(den)})"
    if isinstance(expr, sympy.Add):
        return " + ".join(f"({host_expr_to_isl(a)})" for a in expr.args)
    if isinstance(expr, sympy.Mul):
        consts = [a for a in expr.args if a.is_Integer]
        others = [a for a in expr.args if not a.is_Integer]
        if len(others) == 1 and consts:
            return f"{int(sympy.Mul(*consts))}*({host_expr_to_isl(others[0])})"
    raise ValueError(f"not affine: {expr}")


def param_context(program: Program) -> isl.Set:
    """The program's parameter context as an isl set."""
    return isl.Set(program.context)


# ----------------------------------------------------------------------------------------------
# Host order: which ops share a loop, and every op instance with its iterator values
# ----------------------------------------------------------------------------------------------


def host_loop_ids(ops: Iterable[Operation]) -> dict[int, tuple[int, ...]]:
    """Identity of each op's enclosing loops (outermost first).

    Ops record their loops by value, so two ops are in the *same* loop exactly when they are
    consecutive in host order with equal loops at that depth and all outer ones (the host
    front-end and the builder emit a loop's body contiguously).  Every stage that walks host
    order (UAR, runtime, oracle) uses this one rule.
    """
    result: dict[int, tuple[int, ...]] = {}
    prev_loops: tuple[HostLoop, ...] = ()
    prev_ids: tuple[int, ...] = ()
    counter = 0
    for op in ops:
        ids: list[int] = []
        same = True
        for d, loop in enumerate(op.loops):
            if same and d < len(prev_loops) and prev_loops[d] == loop:
                ids.append(prev_ids[d])
            else:
                same = False
                ids.append(counter)
                counter += 1
        result[op.id] = tuple(ids)
        prev_loops, prev_ids = tuple(op.loops), tuple(ids)
    return result


def eval_host_expr(expr: Any, env: Mapping[str, Any], what: str) -> Union[int, float]:
    """Value of a host expression under ``env`` (host parameters and loop iterators)."""
    if isinstance(expr, (int, float)):
        return expr
    if hasattr(expr, "item") and not isinstance(expr, sympy.Basic):  # numpy scalar
        return expr.item()
    e = sympy.sympify(expr)
    missing = sorted(str(s) for s in e.free_symbols if str(s) not in env)
    if missing:
        names = ", ".join(missing)
        flags = " ".join(f"--param {n}=VALUE" for n in missing)
        raise PolyfuseError(f"{what} = {e} depends on {names}, which has no value: pass {flags} "
                            f"(params={{'{missing[0]}': ...}} in Python)")
    v = sympy.sympify(e.xreplace({s: env[str(s)] for s in e.free_symbols}))
    if v.is_Integer:
        return int(v)
    if v.is_number:
        f = float(v)
        return int(f) if v.is_rational and f.is_integer() else f
    raise PolyfuseError(f"cannot evaluate {what} = {expr}")


def eval_host_int(expr: Any, env: Mapping[str, Any], what: str) -> int:
    """:func:`eval_host_expr` for values that must be integers (sizes, bounds)."""
    v = eval_host_expr(expr, env, what)
    if isinstance(v, float):
        if not v.is_integer():
            raise PolyfuseError(f"{what} = {v} is not an integer")
        v = int(v)
    return int(v)


def host_instances(program: Program, params: Mapping[str, Any]
                   ) -> Iterator[tuple[Operation, tuple[int, ...], dict[str, Any]]]:
    """``(op, iteration, env)`` for every op instance in host order, host loops unrolled."""
    ids = host_loop_ids(program.ops)
    ops = list(program.ops)

    def walk(lo: int, hi: int, depth: int, env: dict[str, Any], h: tuple[int, ...]
             ) -> Iterator[tuple[Operation, tuple[int, ...], dict[str, Any]]]:
        i = lo
        while i < hi:
            op = ops[i]
            if len(op.loops) == depth:
                yield op, h, env
                i += 1
                continue
            lid = ids[op.id][depth]
            j = i
            while j < hi and len(ops[j].loops) > depth and ids[ops[j].id][depth] == lid:
                j += 1
            lp = op.loops[depth]
            lower = eval_host_int(lp.lower, env, f"lower bound of host loop {lp.iterator}")
            upper = eval_host_int(lp.upper, env, f"upper bound of host loop {lp.iterator}")
            step = lp.step or 1
            if step <= 0:
                raise UnsupportedError(f"host loop {lp.iterator} has step {step}", *where(lp.loc))
            for v in range(lower, upper, step):
                yield from walk(i, j, depth + 1, {**env, lp.iterator: v}, h + (v,))
            i = j

    yield from walk(0, len(ops), 0, dict(params), ())
