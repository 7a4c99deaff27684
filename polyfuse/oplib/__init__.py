"""OpenCL kernels implementing ONNX operators, specialized per node.

The ONNX front-end maps each node to one launch of a kernel generated here.  A generator receives
static shapes and attributes and emits OpenCL C 1.2 source with every size baked in, so each
subscript is a quasi-affine function of the work-item ids and loop iterators and polyfuse's
polyhedral analysis of the launch is exact (the one exception is Gather's data-dependent read).

Conventions:

* float32 tensors, contiguous row-major (the caller converts other dtypes; a float16 tensor is
  the same kernel with its buffer declared ``half``: :func:`._common.with_half`).  Gather's indices
  are an ``int32`` buffer (the caller casts int64 indices); Where's condition is a ``bool``
  (one byte per element) buffer.  :attr:`OpKernel.input_dtypes` states each buffer's dtype.
* ``input_shapes[i]`` may be ``None`` for an omitted optional input.  Inputs that ONNX passes as
  tensors but that must be static here (Reshape's shape, Slice's starts/ends/axes/steps,
  Reduce*'s and (Un)Squeeze's axes, Split's split, Clip's min/max, Pad's pads/constant_value/
  axes, Resize's roi/scales/sizes) are given through ``attrs`` under their ONNX names; their
  positions in :attr:`OpKernel.inputs` are ``""``.
* Every kernel parameter is a buffer; all sizes are constants of the source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from polyfuse.core.program import KERNEL_VARIANTS as _VARIANTS
from polyfuse.core.program import KernelVariant, UnsupportedError
from polyfuse.oplib import elementwise, linalg, movement, pool, reduce
from polyfuse.oplib._common import Node, OpKernel

__all__ = ["INTERNAL_OPERATORS", "KERNEL_VARIANTS", "OPERATORS", "KernelVariant", "OpKernel",
           "OpSpec", "op_kernel", "SUPPORTED_OPS"]

@dataclass(frozen=True)
class OpSpec:
    """One operator of the library: its generator, the attributes it reads (inputs that must be
    constants count, under their ONNX names) and what it refuses, for ``docs/operators.md``."""

    generator: Callable[[Node], OpKernel]
    attrs: tuple[str, ...] = ()
    limits: str = ""


_REDUCE_ATTRS = ("axes", "keepdims", "noop_with_empty_axes")
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
#: Attributes the ONNX front-end sets on its own rewrites, not ONNX's (not listed as supported)
_INTERNAL_ATTRS = {"Conv": ("packed_weights", "im2col"), "MatMul": ("packed_panel",),
                   "Gemm": ("packed_panel",)}

#: Every ONNX operator :func:`op_kernel` implements.
OPERATORS: dict[str, OpSpec] = {
    **{op: OpSpec(elementwise.unary) for op in elementwise.UNARY},
    **{op: OpSpec(elementwise.unary, attrs)
       for op, (attrs, _) in elementwise.UNARY_ATTRS.items()},
    "Gelu": OpSpec(elementwise.unary, ("approximate",), "approximate: none, tanh"),
    **{op: OpSpec(elementwise.binary, (), "numpy broadcasting") for op in elementwise.BINARY},
    **{op: OpSpec(elementwise.binary, (), "any number of inputs, numpy broadcasting")
       for op in elementwise.VARIADIC},
    "Where": OpSpec(elementwise.where, (), "condition: bool; numpy broadcasting"),
    "BatchNormalization": OpSpec(elementwise.batch_norm,
                                 ("epsilon", "momentum", "training_mode", "spatial"),
                                 "inference only: training_mode 0, spatial 1"),
    "MatMul": OpSpec(linalg.matmul, (), "numpy.matmul semantics, batch broadcasting"),
    "Gemm": OpSpec(linalg.gemm, ("alpha", "beta", "transA", "transB"), "A and B 2-D"),
    "Conv": OpSpec(linalg.conv, _CONV_ATTRS, "1-D and 2-D (rank-3/4 input); auto_pad NOTSET, "
                   "VALID, SAME_UPPER, SAME_LOWER"),
    "Einsum": OpSpec(linalg.einsum, ("equation",),
                     "no '...', no index repeated within one operand (diagonals)"),
    "Softmax": OpSpec(reduce.softmax, ("axis",), "opset 13 semantics (one axis)"),
    "LayerNormalization": OpSpec(reduce.layer_norm, ("axis", "epsilon", "stash_type"),
                                 "stash_type 1"),
    **{op: OpSpec(reduce.reduce, _REDUCE_ATTRS, "any axes")
       for op in reduce.REDUCTIONS},
    **{op: OpSpec(reduce.reduce, (), "rank >= 3 (N, C, spatial...)") for op in reduce.GLOBAL_POOLS},
    "AveragePool": OpSpec(pool.pool, pool.POOL_ATTRS["AveragePool"], "1-3 spatial axes"),
    "MaxPool": OpSpec(pool.pool, pool.POOL_ATTRS["MaxPool"],
                      "1-3 spatial axes; no Indices output"),
    "Transpose": OpSpec(movement.transpose, ("perm",)),
    "Concat": OpSpec(movement.concat, ("axis",)),
    "Split": OpSpec(movement.split, ("axis", "split", "num_outputs")),
    "Slice": OpSpec(movement.slice_, ("starts", "ends", "axes", "steps"),
                    "any steps, negative ones included"),
    "Gather": OpSpec(movement.gather, ("axis",), "indices int32/int64 (constant indices in "
                     "arithmetic progression become a Slice)"),
    "Expand": OpSpec(movement.expand, ("shape",)),
    "Pad": OpSpec(movement.pad, ("mode", "pads", "constant_value", "axes"),
                  "mode: constant, edge, reflect (not wrap); reflect pads shorter than "
                  "the axis"),
    "Resize": OpSpec(movement.resize, ("mode", "coordinate_transformation_mode",
                                       "nearest_mode", "roi", "scales", "sizes",
                                       "cubic_coeff_a", "exclude_outside",
                                       "extrapolation_value", "antialias", "axes",
                                       "keep_aspect_ratio_policy"),
                     "mode: nearest, linear (at most 3 interpolated axes); "
                     "coordinate_transformation_mode: half_pixel, pytorch_half_pixel, "
                     "align_corners, asymmetric; every nearest_mode; scales exact "
                     "(output size = scale x input size); no antialias, no axes"),
    **{op: OpSpec(movement.copy, attrs,
                   "float32 and float16" if op.startswith("Cast") else "")
       for op, attrs in movement.COPY_OPS.items()},
}

#: Operators of the ONNX front-end's own rewrites, never a model's (not in SUPPORTED_OPS)
INTERNAL_OPERATORS: dict[str, OpSpec] = {
    "Im2Col": OpSpec(linalg.im2col, ("kernel_shape", "strides", "dilations", "panel")),
}

#: Kernel variants by name (:class:`~polyfuse.core.program.KernelVariant`; a target carries one,
#: :meth:`~polyfuse.core.program.Target.with_variant`).
KERNEL_VARIANTS = _VARIANTS


#: ONNX operator types :func:`op_kernel` implements.
SUPPORTED_OPS: frozenset[str] = frozenset(OPERATORS)


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
    variant: KernelVariant = _VARIANTS["tiled"],
) -> OpKernel:
    """The kernel for one ONNX node (opset 13-23 semantics), specialized to its shapes.

    ``name`` is the kernel function name (unique per node).  Work-group sizes and ``__local``
    tiles are chosen to fit ``max_work_group_size`` and ``local_mem_size`` (bytes).  Raises
    :class:`~polyfuse.core.program.UnsupportedError` naming the op and attribute for anything
    outside the library, and :class:`~polyfuse.core.program.PolyfuseError` for inconsistent shapes.
    ``variant`` is the kernel layout (the target's :class:`~polyfuse.core.program.KernelVariant`).

    ``whole_rows`` (MatMul and Gemm): a row reduction over the output's last axis follows, so
    the tiled product computes each output row in one work-group laid out like that reduction
    where the row fits (:func:`polyfuse.oplib.linalg.row_form_problem`; the kernel's ``note``
    says why not otherwise).  Work-group ``grp`` then computes output row ``row_of_group``, a
    quasi-affine C expression of ``grp`` (the identity by default; a permutation of the rows
    when the reduction reads them through a row-permuting Transpose).
    """
    spec = OPERATORS.get(op_type) or INTERNAL_OPERATORS.get(op_type)
    if spec is None:
        raise UnsupportedError(f"{op_type} (kernel '{name}'): operator is not supported")
    if max_work_group_size < 1 or local_mem_size < 4:
        raise UnsupportedError(f"{op_type} (kernel '{name}'): device limits are too small")
    node = Node.of(
        op_type, attrs, input_shapes, output_shapes, name, max_work_group_size, local_mem_size,
        variant,
    )
    if whole_rows and op_type in ("MatMul", "Gemm"):
        return (linalg.matmul if op_type == "MatMul" else linalg.gemm)(
            node, whole_rows=True, row_of_group=row_of_group)
    node.check_attrs((*spec.attrs, *_INTERNAL_ATTRS.get(op_type, ())))
    return spec.generator(node)
