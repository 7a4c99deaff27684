"""Element-wise and movement kernels laid out like a register-blocked producer.

A register-blocked MatMul, Gemm or Conv (:mod:`polyfuse.oplib.linalg`, ``blocked`` variant)
writes an R x C block of outputs per work-item (:class:`~polyfuse.oplib._common.BlockLayout`).
The usual consumers run one element per work-item, so the dependence from the product to its
bias add or activation is not thread-width and fusion cannot join them.  The kernels here run
the consumer with the producer's launch shape and work-group size, each work-item covering the
same block with plain counted loops.  Producer and consumer work-items then touch the same
elements: a thread-width dependence the planner fuses with no barrier.  Every subscript stays
quasi-affine in the ids and loop iterators, so the front-end models the kernels exactly.

The consumer's output has the producer's layout again, so chains (bias add, GELU, residual
add) stay blocked.  A Transpose covers its input's block and writes it permuted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Optional

from polyfuse.oplib import elementwise
from polyfuse.oplib._common import (
    BlockLayout,
    Node,
    OpKernel,
    Param,
    broadcast_shape,
    broadcast_strides,
    index_expr,
    make_kernel,
    prod,
    render,
    shape_str,
    strides_of,
)

#: ONNX operators that have a block-covering form.
BLOCKED_OPS: frozenset[str] = frozenset(
    {*elementwise.UNARY, *elementwise.UNARY_ATTRS, "Gelu", *elementwise.BINARY,
     *elementwise.VARIADIC, "Transpose"}
)


def _split(shape: Sequence[int], layout: BlockLayout) -> Optional[int]:
    """``k`` with ``prod(shape[:k]) == lead_extent`` and ``prod(shape[k:]) == col_extent``
    (the block's rows run over the leading dimensions, its columns over the trailing ones)."""
    for k in range(len(shape) + 1):
        if prod(shape[:k]) == layout.lead_extent and prod(shape[k:]) == layout.col_extent:
            return k
    return None


def _index(shape: Sequence[int], strides: Sequence[int], layout: BlockLayout) -> str:
    """The element of a tensor viewed as ``shape`` with ``strides`` at the block position
    (``lead``, ``col``): the two parts separately when the shape splits, else through the flat
    index.  Quasi-affine either way."""
    k = _split(shape, layout)
    if k is None:
        return index_expr(f"lead * {layout.col_extent} + col", shape, strides)
    parts = [_part("lead", layout.lead_base, "bi", layout.rows, shape[:k], strides[:k]),
             _part("col", layout.col_base, "bj", layout.cols, shape[k:], strides[k:])]
    parts = [p for p in parts if p != "0"]
    return " + ".join(parts) or "0"


def _part(var: str, base: str, step: str, block: int, shape: Sequence[int],
          strides: Sequence[int]) -> str:
    """``var`` (= ``base + step``, ``step < block``) viewed as ``shape`` with ``strides``.

    When the block divides the innermost extent, the block never crosses it: the coordinates
    are those of ``base`` with ``step`` added to the innermost one, so the divisions and
    remainders are per work-item, not per element."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not base or not dims or dims[-1][0] % block:
        return index_expr(var, shape, strides)
    inner = dims[-1][1]
    head = index_expr(base, shape, strides)
    tail = "" if not inner else step if inner == 1 else f"{step} * {inner}"
    return " + ".join(p for p in (head if head != "0" else "", tail) if p) or "0"


def covers(op_type: str, layout: BlockLayout, output_shape: Sequence[int]) -> bool:
    """Whether ``op_type`` producing ``output_shape`` has a form covering ``layout``'s blocks."""
    return op_type in BLOCKED_OPS and prod(output_shape) == layout.lead_extent * layout.col_extent


def _kernel(node: Node, layout: BlockLayout, params: list[Param], stmts: str,
            inputs: list[str], comment: str) -> OpKernel:
    lines = stmts.strip("\n").split("\n")
    if layout.col_guard:
        lines = [f"if ({layout.col_guard}) {{", *("    " + ln for ln in lines), "}"]
    inner = "\n".join("        " + ln for ln in lines)
    loops = (
        "for (int bi = 0; bi < RB; bi++) {\n"
        f"    const int lead = {layout.lead};\n"
        "    for (int bj = 0; bj < CB; bj++) {\n"
        f"        const int col = {layout.col};\n"
        f"{inner}\n"
        "    }\n"
        "}"
    )
    if layout.guard:
        loops = f"if ({layout.guard}) {{\n" + "\n".join(
            "    " + ln for ln in loops.split("\n")) + "\n}"
    body = f"{layout.prologue}\n{loops}\n"
    source = render(node, {"RB": layout.rows, "CB": layout.cols}, params, body,
                    comment + f" (covering {layout.rows}x{layout.cols} blocks)")
    return make_kernel(node, source, layout.global_size, layout.local_size, inputs, ["y"])


def _elementwise(node: Node, layout: BlockLayout) -> OpKernel:
    op = node.op_type
    unary = op in elementwise.UNARY or op in elementwise.UNARY_ATTRS or op == "Gelu"
    n_in = 1 if unary else len(node.input_shapes)  # Clip's bounds are attributes here
    value = elementwise.unary_expr(node) if unary else ""
    if not unary:
        node.check_attrs([])
    if op in elementwise.BINARY and n_in != 2 or n_in < 1:
        raise node.invalid(f"expects {'2 inputs' if op in elementwise.BINARY else 'inputs'}, "
                           f"got {n_in}")
    shapes = [node.input(i) for i in range(n_in)]
    out = broadcast_shape(node, shapes)
    node.check_output(0, out)
    names = ["x"] if n_in == 1 else ["a", "b"] if n_in == 2 else [f"x{i}" for i in range(n_in)]
    lines = [f"const float v{i} = {n}[{_index(out, broadcast_strides(node, s, out), layout)}];"
             for i, (n, s) in enumerate(zip(names, shapes))]
    if unary:
        lines[0] = lines[0].replace("const float v0", "const float v")
    elif op in elementwise.BINARY:
        value = elementwise.BINARY[op]("v0", "v1")
    else:
        acc = "v0"
        for i in range(1, n_in):
            lines.append(f"const float r{i} = {elementwise.VARIADIC[op](acc, f'v{i}')};")
            acc = f"r{i}"
        value = acc
    lines.append(f"y[{_index(out, strides_of(out), layout)}] = {value};")
    params = [Param(n, s) for n, s in zip(names, shapes)] + [Param("y", out, const=False)]
    comment = f"{op} {' , '.join(shape_str(s) for s in shapes)} -> {shape_str(out)}"
    return _kernel(node, layout, params, "\n".join(lines), names, comment)


def _transpose(node: Node, layout: BlockLayout) -> OpKernel:
    """Each work-item moves its block of the input to the permuted positions."""
    shape, perm, out = node.transpose_perm()
    ost = strides_of(out)
    dst = [ost[perm.index(d)] for d in range(len(shape))]  # output stride of each input axis
    stmts = f"y[{_index(shape, dst, layout)}] = x[{_index(shape, strides_of(shape), layout)}];"
    params = [Param("x", shape), Param("y", out, const=False)]
    return _kernel(node, layout, params, stmts, ["x"], f"Transpose {shape_str(shape)} perm={perm}")


def blocked_kernel(
    op_type: str,
    attrs: Mapping[str, Any],
    input_shapes: Sequence[Optional[Sequence[int]]],
    output_shapes: Sequence[Optional[Sequence[int]]],
    layout: BlockLayout,
    *,
    name: str,
    max_work_group_size: int = 256,
    local_mem_size: int = 32768,
) -> OpKernel:
    """The kernel for one node covering ``layout``'s blocks (see :func:`covers`).

    Element-wise results keep the layout (the returned kernel's ``block``); a Transpose's
    result does not.
    """
    node = Node.of(
        op_type, attrs, input_shapes, output_shapes, name, max_work_group_size, local_mem_size
    )
    if not covers(op_type, layout, node.output(0)):
        raise node.unsupported(f"no form covering {layout.rows}x{layout.cols} blocks")
    if op_type == "Transpose":
        return _transpose(node, layout)
    return replace(_elementwise(node, layout), block=layout)


__all__ = ["BLOCKED_OPS", "blocked_kernel", "covers"]
