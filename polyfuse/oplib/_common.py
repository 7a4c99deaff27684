"""Shared machinery of the operator library: the node record, errors, index math, rendering.

Every generated kernel is specialized for one node: sizes are ``#define`` constants (``#undef``-ed
at the end of the source, so sources of several nodes can be concatenated) and every subscript is
a quasi-affine function of work-item ids and loop iterators.  That is what lets polyfuse's
polyhedral front-end model the accesses exactly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np

from polyfuse.core.program import KERNEL_VARIANTS, KernelVariant, PolyfuseError, UnsupportedError

Shape = tuple[int, ...]

#: Work-items per work-group of the element-wise kernels (clamped to the device limit).
ELEMENTWISE_LOCAL_SIZE = 64
#: Upper bound on the lanes of a work-group reduction (one work-group per reduced row).
REDUCTION_MAX_LANES = 128
#: the default kernel layout (one output per work-item: what planning and the schedules use)
TILED: KernelVariant = KERNEL_VARIANTS["tiled"]
#: Largest index an ``int`` subscript may reach.
INT_MAX = 2**31 - 1

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class BlockLayout:
    """Which output elements each work-item of a register-blocked kernel writes.

    Work-item ids come from ``global_size``/``local_size``; ``prologue`` (C statements, literal
    sizes only) derives its base coordinates, under ``guard`` when not empty.  It then writes
    the ``rows x cols`` block ``bi < rows``, ``bj < cols`` at element ``lead * col_extent + col``
    of the output, where ``lead`` (an expression of ``bi``) indexes the leading dimensions
    flattened (``lead_extent`` values) and ``col`` (of ``bj``) the trailing ones.  A consumer
    launched with the same geometry and the same block reads exactly what the same work-item
    wrote: a thread-width dependence (:mod:`polyfuse.oplib.blocked`).
    """

    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    prologue: str
    guard: str
    rows: int
    cols: int
    lead: str
    col: str
    lead_extent: int
    col_extent: int
    #: ``lead``/``col`` at ``bi = 0``/``bj = 0``: multiples of ``rows``/``cols``
    lead_base: str = ""
    col_base: str = ""
    #: condition on ``col`` for the element to exist (a ragged last column block), or ``""``
    col_guard: str = ""


@dataclass(frozen=True)
class OpKernel:
    """One node's kernel: source, launch geometry and how its parameters bind to tensors.

    ``inputs``/``outputs`` have one entry per node input/output position (ONNX order); an entry is
    the kernel parameter bound to that tensor, or ``""`` when the position is not a kernel buffer
    (an omitted optional input, or a value the caller passed statically through ``attrs`` such as
    Reshape's shape or Slice's starts).  ``input_dtypes`` gives the numpy dtype name of each input
    buffer (``"float32"``, ``"int32"`` for Gather indices, ``"bool"`` for Where's condition).
    The kernel's parameters are the bound inputs in input order, then the bound outputs.
    This library always sets ``local_size`` (element-wise kernels too): with a known local size
    ``get_global_id`` is affine in the group and local ids, which keeps the analysis exact.
    """

    name: str
    source: str
    global_size: tuple[int, ...]
    local_size: Optional[tuple[int, ...]]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_dtypes: tuple[str, ...] = ()
    #: the block of outputs each work-item writes, for register-blocked kernels
    block: Optional[BlockLayout] = None
    #: why the generator chose the form it did, when it was asked for another (reported)
    note: str = ""
    #: ``(m, n, k, batch)`` of a register-tiled product (its register tile can be tuned)
    product: Optional[tuple[int, int, int, int]] = None

    def input_dtype(self, i: int) -> str:
        """The numpy dtype name of input position ``i`` (float32 unless stated otherwise)."""
        return self.input_dtypes[i] if i < len(self.input_dtypes) else "float32"


@dataclass(frozen=True)
class Node:
    """What a generator needs to know about one ONNX node (static shapes and attributes)."""

    op_type: str
    attrs: Mapping[str, Any]
    input_shapes: tuple[Optional[Shape], ...]
    output_shapes: tuple[Optional[Shape], ...]
    name: str
    max_work_group_size: int
    local_mem_size: int
    #: the kernel layout asked for (the target's, :class:`~polyfuse.core.program.KernelVariant`)
    variant: KernelVariant = TILED

    @staticmethod
    def of(
        op_type: str,
        attrs: Optional[Mapping[str, Any]],
        input_shapes: Sequence[Optional[Sequence[int]]],
        output_shapes: Sequence[Optional[Sequence[int]]],
        name: str,
        max_work_group_size: int,
        local_mem_size: int,
        variant: KernelVariant = TILED,
    ) -> Node:
        """The node from caller-supplied values, normalised once for every generator entry."""
        return Node(
            op_type=op_type,
            attrs=dict(attrs or {}),
            input_shapes=tuple(
                None if s is None else tuple(int(d) for d in s) for s in input_shapes
            ),
            output_shapes=tuple(
                None if s is None else tuple(int(d) for d in s) for s in output_shapes
            ),
            name=name,
            max_work_group_size=int(max_work_group_size),
            local_mem_size=int(local_mem_size),
            variant=variant,
        )

    def where(self) -> str:
        return f"{self.op_type} (kernel '{self.name}')"

    def unsupported(self, message: str) -> UnsupportedError:
        """An error for a feature outside the library, naming op and attribute."""
        return UnsupportedError(f"{self.where()}: {message}")

    def invalid(self, message: str) -> PolyfuseError:
        """An error for inconsistent input (shapes that do not match the attributes)."""
        return PolyfuseError(f"{self.where()}: {message}")

    def attr(self, key: str, default: Any = None) -> Any:
        value = self.attrs.get(key, default)
        return value.decode() if isinstance(value, bytes) else value

    def int_attr(self, key: str, default: int) -> int:
        value = self.attr(key, default)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self.invalid(f"attribute '{key}' must be an integer, got {value!r}") from None

    def ints_attr(self, key: str, default: Optional[Sequence[int]] = None) -> Optional[list[int]]:
        value = self.attr(key, default)
        if value is None:
            return None
        try:
            return [int(v) for v in value]
        except (TypeError, ValueError):
            raise self.invalid(f"attribute '{key}' must be a list of integers") from None

    def has_input(self, i: int) -> bool:
        return i < len(self.input_shapes) and self.input_shapes[i] is not None

    def input(self, i: int) -> Shape:
        if not self.has_input(i):
            raise self.invalid(f"input {i} is required but missing")
        return self.input_shapes[i]  # type: ignore[return-value]

    def output(self, i: int) -> Shape:
        if i >= len(self.output_shapes) or self.output_shapes[i] is None:
            raise self.invalid(f"output {i} is required but missing")
        return self.output_shapes[i]  # type: ignore[return-value]

    def has_output(self, i: int) -> bool:
        return i < len(self.output_shapes) and self.output_shapes[i] is not None

    def check_attrs(self, allowed: Sequence[str]) -> None:
        """Refuse attributes the generator does not know rather than ignoring their meaning."""
        for key in self.attrs:
            if key not in allowed:
                raise self.unsupported(f"attribute '{key}' is not supported")

    def check_output(self, i: int, expected: Sequence[int]) -> None:
        got = self.output(i)
        if tuple(got) != tuple(expected):
            raise self.invalid(f"output {i} has shape {tuple(got)}, expected {tuple(expected)}")

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        """Normalize a possibly negative axis, refusing out-of-range ones."""
        if not -rank <= axis < max(rank, 1):
            raise self.invalid(f"attribute '{what}'={axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def transpose_perm(self) -> tuple[Shape, list[int], Shape]:
        """Input shape, checked ``perm`` (default reverses the axes) and output shape of a
        Transpose, one reading of the attribute for the plain and the blocked kernel."""
        self.check_attrs(["perm"])
        shape = self.input(0)
        rank = len(shape)
        perm = self.ints_attr("perm") or list(range(rank - 1, -1, -1))
        perm = [self.axis(p, rank, "perm") for p in perm]
        if sorted(perm) != list(range(rank)):
            raise self.invalid(f"attribute 'perm' {perm} is not a permutation of {rank} axes")
        out = tuple(shape[p] for p in perm)
        self.check_output(0, out)
        return shape, perm, out


def prod(shape: Sequence[int]) -> int:
    return math.prod(shape)


def strides_of(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of a contiguous tensor."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides)


def broadcast_shape(node: Node, shapes: Sequence[Sequence[int]]) -> Shape:
    """The numpy broadcast of ``shapes`` (multidirectional broadcasting)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        dims = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise node.invalid(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(node: Node, in_shape: Sequence[int], out_shape: Sequence[int]) -> Shape:
    """Strides of ``in_shape`` seen through ``out_shape`` (0 along broadcast dimensions)."""
    pad = len(out_shape) - len(in_shape)
    if pad < 0:
        raise node.invalid(f"shape {tuple(in_shape)} does not broadcast to {tuple(out_shape)}")
    own = strides_of(in_shape)
    result = []
    for d, n in enumerate(out_shape):
        k = d - pad
        if k < 0 or in_shape[k] == 1:
            result.append(0)
        elif in_shape[k] == n:
            result.append(own[k])
        else:
            raise node.invalid(
                f"shape {tuple(in_shape)} does not broadcast to {tuple(out_shape)}"
            )
    return tuple(result)


def vector_lanes(vector_width: int, n: int) -> int:
    """Lanes of the OpenCL vectors a kernel walks ``n`` consecutive elements in: the widest
    of 16, 8 and 4 within the device's native ``vector_width`` dividing ``n``; 1 (named
    scalars, left to the compiler's vectorizer) where none does."""
    return next((w for w in (16, 8, 4) if w <= vector_width and n % w == 0), 1)


def halved_lanes(vector: str, chunk: int, half: int, left: bool) -> list[str]:
    """Statements splitting ``vector``, the ``float<2 * half>`` chunk ``chunk`` of a row, for
    windows at stride 2: its even lanes ``e_<chunk>`` (columns ``2o``) and odd lanes
    ``o_<chunk>`` (columns ``2o + 1``); with ``left`` also ``l_<chunk>`` (columns ``2o - 1``),
    the odd lanes shifted by one lane with ``prev`` shifted in, ``prev`` then becoming this
    chunk's last odd lane (the caller declares it, holding the left pad's value).  Why:
    loads two columns apart do not vectorize as loops; a vector's halves do (the stride-2
    MaxPool and depthwise Conv rows)."""
    ht = f"float{half}"
    lines = [f"const {ht} e_{chunk} = {vector}.even;", f"const {ht} o_{chunk} = {vector}.odd;"]
    if left:
        shifted = ", ".join(["prev", *(f"o_{chunk}.s{j:x}" for j in range(half - 1))])
        lines += [f"const {ht} l_{chunk} = ({ht})({shifted});",
                  f"prev = o_{chunk}.s{half - 1:x};"]
    return lines


def index_expr(var: str, shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> str:
    """C expression mapping a row-major flat index ``var`` over ``shape`` to ``Σ coord·stride``.

    ``var`` must lie in ``[0, prod(shape))``.  Coordinates are ``(var / inner) % size`` (the
    outermost needs no ``%``); size-1 dimensions and zero strides drop out and adjacent dimensions
    that are contiguous in the target are merged, so an identity map is just ``var``.  The result
    is quasi-affine in ``var``.
    """
    if not _IDENT.match(var):
        var = f"({var})"
    merged: list[list[int]] = []
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        if merged and merged[-1][1] == s * n:
            merged[-1] = [merged[-1][0] * n, s]
        else:
            merged.append([n, s])
    terms: list[str] = []
    inner = 1
    for i in range(len(merged) - 1, -1, -1):
        n, s = merged[i]
        if s != 0:
            coord = var if inner == 1 else f"{var} / {inner}"
            if i > 0:
                coord = f"({coord}) % {n}" if inner != 1 else f"{coord} % {n}"
            if s == 1:
                terms.append(f"({coord})" if " " in coord else coord)
            else:
                terms.append(f"({coord}) * {s}" if " " in coord else f"{coord} * {s}")
        inner *= n
    return add_offset(" + ".join(reversed(terms)), offset)


def add_offset(expr: str, offset: int) -> str:
    """``expr + offset`` with trivial parts left out."""
    if not expr:
        return str(offset)
    if offset > 0:
        return f"{expr} + {offset}"
    if offset < 0:
        return f"{expr} - {-offset}"
    return expr


def flt(value: float) -> str:
    """A float32 literal for OpenCL C."""
    text = repr(float(np.float32(value)))
    if not math.isfinite(float(text)):
        return "INFINITY" if text == "inf" else "-INFINITY" if text == "-inf" else "NAN"
    return text + "f"


def elementwise_local_size(node: Node) -> int:
    return max(1, min(ELEMENTWISE_LOCAL_SIZE, node.max_work_group_size))


def round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def pow2_ceil(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True)
class Param:
    """A kernel buffer parameter: C name, element type, constness and the tensor shape."""

    name: str
    shape: Shape
    ctype: str = "float"
    const: bool = True


def render(
    node: Node,
    defines: Mapping[str, int | str],
    params: Sequence[Param],
    body: str,
    comment: str,
) -> str:
    """The complete OpenCL C source of a node: defines, one ``__kernel``, undefs."""
    if not _IDENT.match(node.name):
        raise node.invalid(f"kernel name {node.name!r} is not a C identifier")
    clashes = {node.name, *(p.name for p in params)} & set(defines)
    if clashes:
        raise node.invalid(f"kernel/parameter name clashes with a size macro: {sorted(clashes)}")
    for p in params:
        total = prod(p.shape)
        if total == 0:
            raise node.unsupported(f"zero-sized tensor '{p.name}' {p.shape} is not supported")
        if total > INT_MAX:
            raise node.unsupported(f"tensor '{p.name}' has more than 2^31-1 elements")
    lines = [f"/* polyfuse oplib: {comment} */"]
    lines += [f"#define {k} {v}" for k, v in defines.items()]
    plist = ",\n    ".join(
        f"{'const ' if p.const else ''}__global {p.ctype} *{p.name}" for p in params
    )
    lines.append(f"__kernel void {node.name}(\n    {plist})\n{{")
    lines += ["    " + ln if ln else "" for ln in body.strip("\n").split("\n")]
    lines.append("}")
    lines += [f"#undef {k}" for k in defines]
    return "\n".join(lines) + "\n"


def make_kernel(
    node: Node,
    source: str,
    global_size: tuple[int, ...],
    local_size: Optional[tuple[int, ...]],
    inputs: Sequence[str],
    outputs: Sequence[str],
    dtypes: Optional[Mapping[str, str]] = None,
) -> OpKernel:
    """Assemble the record, padding the bindings to the node's input/output positions."""
    n_in = max(len(node.input_shapes), len(inputs))
    n_out = max(len(node.output_shapes), len(outputs))
    ins = tuple(inputs) + ("",) * (n_in - len(inputs))
    outs = tuple(outputs) + ("",) * (n_out - len(outputs))
    dtypes = dtypes or {}
    return OpKernel(
        name=node.name,
        source=source,
        global_size=tuple(global_size),
        local_size=None if local_size is None else tuple(local_size),
        inputs=ins,
        outputs=outs,
        input_dtypes=tuple(dtypes.get(p, "float32") if p else "float32" for p in ins),
    )


def with_half(opk: OpKernel, params: Collection[str]) -> OpKernel:
    """``opk`` with the float buffers ``params`` stored as ``half`` (ONNX float16, OpenCL's
    ``cl_khr_fp16``): every load widens to float and every store rounds to half, so the
    kernel's arithmetic stays float32 and its accesses (element subscripts) do not change."""
    source = opk.source
    for p in params:
        source, n = re.subn(rf"__global float \*{p}\b", f"__global half *{p}", source)
        if n != 1:
            raise ValueError(f"kernel {opk.name} has no float buffer parameter {p}")
    return replace(opk, source="#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n" + source)


def elementwise_kernel(
    node: Node,
    total: int,
    params: Sequence[Param],
    defines: Mapping[str, int | str],
    stmts: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    comment: str,
    dtypes: Optional[Mapping[str, str]] = None,
) -> OpKernel:
    """A 1-D kernel with one work-item per element ``gid < TOTAL`` running ``stmts``.

    The NDRange is rounded up to the work-group size (OpenCL 1.2 needs uniform groups), so the
    body is guarded rather than ended by an early ``return``.
    """
    local = elementwise_local_size(node)
    body = "const int gid = get_global_id(0);\nif (gid < TOTAL) {\n"
    body += "\n".join("    " + ln if ln else "" for ln in stmts.strip("\n").split("\n"))
    body += "\n}"
    source = render(node, {"TOTAL": total, **defines}, params, body, comment)
    return make_kernel(
        node, source, (round_up(total, local),), (local,), inputs, outputs, dtypes
    )


def shape_str(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if len(shape) else "scalar"


@dataclass(frozen=True)
class Grid:
    """One work-item per element of ``shape`` on an NDRange of up to three dimensions.

    Dimension 0 runs along the innermost axis longer than 1, dimension 1 along the next one and
    dimension 2 along the remaining leading axes folded together.  A subscript is then
    ``Σ coordinate · stride`` without any division for tensors with at most three axes longer
    than 1 (and with division of the folded leading coordinate only by the leading sizes
    otherwise).  A flat 1-D id would need ``/`` and ``%`` by row lengths such as 768 or 16384,
    which makes every isl problem about the launch (widths, re-indexing) grow with the sizes.
    """

    shape: Shape
    #: axes of ``shape`` longer than 1, outermost first
    axes: tuple[int, ...]

    @staticmethod
    def of(shape: Sequence[int]) -> Grid:
        return Grid(tuple(shape), tuple(a for a, n in enumerate(shape) if n != 1))

    @property
    def extents(self) -> tuple[int, ...]:
        """Work-items along each NDRange dimension (``(1,)`` for a single element)."""
        inner = [self.shape[a] for a in reversed(self.axes[-2:])]
        lead = self.axes[:-2]
        return tuple(inner + ([prod(self.shape[a] for a in lead)] if lead else [])) or (1,)

    def coord(self, axis: int) -> str:
        """The C expression of the coordinate along ``axis`` (``"0"`` for a unit axis)."""
        if self.shape[axis] == 1:
            return "0"
        k = self.axes.index(axis)
        n = len(self.axes)
        if k >= n - 2:
            return f"i{n - 1 - k}"
        lead = self.axes[:-2]
        if len(lead) == 1:
            return "i2"
        inner = prod(self.shape[a] for a in lead[k + 1:])
        coord = "i2" if inner == 1 else f"i2 / {inner}"
        return coord if k == 0 else (f"({coord}) % {self.shape[axis]}" if inner != 1
                                     else f"{coord} % {self.shape[axis]}")

    def at(self, strides: Sequence[int], offset: int = 0) -> str:
        """``Σ coord(axis) · strides[axis] + offset``: an element of a tensor seen through
        this grid (0 strides for broadcast axes)."""
        terms = []
        for a in self.axes:
            if strides[a] == 0:
                continue
            c = self.coord(a)
            c = f"({c})" if " " in c and strides[a] != 1 else c
            terms.append(c if strides[a] == 1 else f"{c} * {strides[a]}")
        return add_offset(" + ".join(terms), offset)

    def flat(self) -> str:
        """The row-major position of the work-item's element in ``shape``."""
        return self.at(strides_of(self.shape))


def grid_kernel(
    node: Node,
    grid: Grid,
    params: Sequence[Param],
    defines: Mapping[str, int | str],
    stmts: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    comment: str,
    dtypes: Optional[Mapping[str, str]] = None,
) -> OpKernel:
    """A kernel with one work-item per element of ``grid`` (ids ``i0``..``i2``) running
    ``stmts``, whose subscripts come from :meth:`Grid.at`.

    Each NDRange dimension is rounded up to its work-group size (OpenCL 1.2 needs uniform
    groups), and the body is guarded where it was rounded.
    """
    limit = elementwise_local_size(node)
    extents = grid.extents
    local: list[int] = []
    for n in extents:
        room = pow2_floor(max(1, limit // prod(local)))
        exact = min(n & -n, room)  # a power of two dividing n: no idle work-items, no guard
        local.append(exact if exact >= min(8, room) else min(pow2_ceil(n), room))
    glob = tuple(round_up(n, lsz) for n, lsz in zip(extents, local))
    lines = [f"const int i{d} = get_global_id({d});" for d in range(len(extents))]
    guard = " && ".join(f"i{d} < {n}" for d, (n, g) in enumerate(zip(extents, glob)) if g != n)
    body = "\n".join(lines) + "\n"
    if guard:
        body += f"if ({guard}) {{\n"
        body += "\n".join("    " + ln if ln else "" for ln in stmts.strip("\n").split("\n"))
        body += "\n}"
    else:
        body += stmts.strip("\n")
    source = render(node, defines, params, body, comment)
    return make_kernel(node, source, glob, tuple(local), inputs, outputs, dtypes)
