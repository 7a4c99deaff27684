"""OpenCL kernels implementing ONNX operators, specialized per node.

The ONNX front-end maps each node to one launch of a kernel generated here.  A generator receives
static shapes and attributes and emits OpenCL C 1.2 source with every size baked in, so each
subscript is a quasi-affine function of the work-item ids and loop iterators and polyfuse's
polyhedral analysis of the launch is exact (the one exception is Gather's data-dependent read).

Conventions:

* float32 tensors, contiguous row-major (the caller converts other dtypes).  Gather's indices
  are an ``int32`` buffer (the caller casts int64 indices); Where's condition is a ``bool``
  (one byte per element) buffer.  :attr:`OpKernel.input_dtypes` states each buffer's dtype.
* ``input_shapes[i]`` may be ``None`` for an omitted optional input.  Inputs that ONNX passes as
  tensors but that must be static here (Reshape's shape, Slice's starts/ends/axes/steps,
  Reduce*'s and (Un)Squeeze's axes, Split's split) are given through ``attrs`` under their ONNX
  names; their positions in :attr:`OpKernel.inputs` are ``""``.
* Every kernel parameter is a buffer; all sizes are constants of the source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Optional

from polyfuse.oplib import elementwise, linalg, movement, reduce
from polyfuse.oplib._common import REDUCTION_MAX_LANES, Node, OpKernel
from polyfuse.program import UnsupportedError

__all__ = ["KERNEL_VARIANTS", "OpKernel", "kernel_variant", "op_kernel", "SUPPORTED_OPS"]

_GENERATORS: dict[str, Callable[[Node], OpKernel]] = {
    **{op: elementwise.unary for op in elementwise.UNARY},
    "Gelu": elementwise.unary,
    **{op: elementwise.binary for op in elementwise.BINARY},
    **{op: elementwise.binary for op in elementwise.VARIADIC},
    "Where": elementwise.where,
    "BatchNormalization": elementwise.batch_norm,
    "MatMul": linalg.matmul,
    "Gemm": linalg.gemm,
    "Conv": linalg.conv,
    "Softmax": reduce.softmax,
    "LayerNormalization": reduce.layer_norm,
    "ReduceMean": reduce.reduce,
    "ReduceSum": reduce.reduce,
    "Transpose": movement.transpose,
    "Concat": movement.concat,
    "Split": movement.split,
    "Slice": movement.slice_,
    "Gather": movement.gather,
    "Expand": movement.expand,
    **{op: movement.copy for op in movement.COPY_OPS},
}

#: Kernel variants: ``tiled`` is what planning and the checked-in schedules use (one output per
#: work-item, wide work-groups: fuses best); ``blocked`` fits CPU-like devices (register-blocked
#: matrix products, few-lane row reductions).  :class:`polyfuse.InferenceSession` measures both.
KERNEL_VARIANTS: dict[str, tuple[str, int]] = {
    "tiled": ("tiled", REDUCTION_MAX_LANES),
    "blocked": ("blocked", 8),
}


@contextmanager
def kernel_variant(name: str) -> Iterator[None]:
    """Generate kernels of variant ``name`` (see :data:`KERNEL_VARIANTS`) inside the block."""
    if name not in KERNEL_VARIANTS:
        raise ValueError(f"unknown kernel variant {name!r}; known: {sorted(KERNEL_VARIANTS)}")
    product, lanes = KERNEL_VARIANTS[name]
    t1 = linalg.product_form.set(product)
    t2 = reduce.reduction_lanes.set(lanes)
    try:
        yield
    finally:
        reduce.reduction_lanes.reset(t2)
        linalg.product_form.reset(t1)


#: ONNX operator types :func:`op_kernel` implements.
SUPPORTED_OPS: frozenset[str] = frozenset(_GENERATORS)


def op_kernel(
    op_type: str,
    attrs: Mapping[str, Any],
    input_shapes: Sequence[Optional[Sequence[int]]],
    output_shapes: Sequence[Optional[Sequence[int]]],
    *,
    name: str,
    max_work_group_size: int = 256,
    local_mem_size: int = 32768,
    whole_rows: bool = False,
    row_of_group: str = "grp",
) -> OpKernel:
    """The kernel for one ONNX node (opset 13-23 semantics), specialized to its shapes.

    ``name`` is the kernel function name (unique per node).  Work-group sizes and ``__local``
    tiles are chosen to fit ``max_work_group_size`` and ``local_mem_size`` (bytes).  Raises
    :class:`~polyfuse.program.UnsupportedError` naming the op and attribute for anything outside
    the library, and :class:`~polyfuse.program.PolyfuseError` for inconsistent shapes.

    ``whole_rows`` (MatMul and Gemm): a row reduction over the output's last axis follows, so
    the tiled product computes each output row in one work-group laid out like that reduction
    where the row fits (:func:`polyfuse.oplib.linalg.row_form_problem`; the kernel's ``note``
    says why not otherwise).  Work-group ``grp`` then computes output row ``row_of_group``, a
    quasi-affine C expression of ``grp`` (the identity by default; a permutation of the rows
    when the reduction reads them through a row-permuting Transpose).
    """
    generator = _GENERATORS.get(op_type)
    if generator is None:
        raise UnsupportedError(f"{op_type} (kernel '{name}'): operator is not supported")
    if max_work_group_size < 1 or local_mem_size < 4:
        raise UnsupportedError(f"{op_type} (kernel '{name}'): device limits are too small")
    node = Node.of(
        op_type, attrs, input_shapes, output_shapes, name, max_work_group_size, local_mem_size
    )
    if whole_rows and op_type in ("MatMul", "Gemm"):
        return (linalg.matmul if op_type == "MatMul" else linalg.gemm)(
            node, whole_rows=True, row_of_group=row_of_group)
    return generator(node)
