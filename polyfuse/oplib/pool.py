"""AveragePool and MaxPool: one work-item per output element, a counted loop per window axis.

The window's input position along each spatial axis is affine in the work-item's coordinate
and the loop iterator (``o * stride - pad_begin + k * dilation``); padding is a guard on that
position, never a clamped subscript, so the front-end models every read exactly (as for Conv).
"""

from __future__ import annotations

from polyfuse.oplib._common import Grid, Node, OpKernel, Param, grid_kernel, shape_str, strides_of
from polyfuse.oplib.linalg import conv_pads

#: The attributes each pooling operator takes.
POOL_ATTRS: dict[str, tuple[str, ...]] = {
    "AveragePool": ("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                    "pads", "strides"),
    "MaxPool": ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order",
                "strides"),
}


def _out_size(size: int, kernel: int, stride: int, dil: int, begin: int, end: int,
              ceil_mode: bool) -> int:
    """ONNX/onnxruntime pooled size; with ``ceil_mode`` a last window that would start in the
    end padding is dropped."""
    span = size + begin + end - ((kernel - 1) * dil + 1)
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    return out - 1 if (out - 1) * stride >= size + begin else out


def pool(node: Node) -> OpKernel:
    """AveragePool (``count_include_pad``) and MaxPool (no ``Indices`` output) over 1-3
    spatial axes of an N x C x ... input, with strides, dilations, pads/auto_pad, ceil_mode."""
    node.check_attrs(POOL_ATTRS[node.op_type])
    if node.has_output(1):
        raise node.unsupported("output 'Indices' is not supported")
    shape = node.input(0)
    nd = len(shape) - 2
    if not 1 <= nd <= 3:
        raise node.unsupported(f"only 1-3 spatial axes are supported, got input {shape}")
    kernel = node.ints_attr("kernel_shape")
    if kernel is None or len(kernel) != nd or min(kernel) < 1:
        raise node.invalid(f"attribute 'kernel_shape' must give {nd} positive sizes")
    strides = node.ints_attr("strides") or [1] * nd
    dil = node.ints_attr("dilations") or [1] * nd
    if len(strides) != nd or len(dil) != nd or min(strides + dil) < 1:
        raise node.invalid(f"bad 'strides' {strides} or 'dilations' {dil}")
    pads = conv_pads(node, list(shape[2:]), kernel, strides, dil)
    ceil_mode = bool(node.int_attr("ceil_mode", 0))
    spatial = [_out_size(shape[2 + d], kernel[d], strides[d], dil[d], pads[d], pads[nd + d],
                         ceil_mode) for d in range(nd)]
    if min(spatial) < 1:
        raise node.invalid("the pooling window does not fit the padded input")
    out = shape[:2] + tuple(spatial)
    node.check_output(0, out)
    average = node.op_type == "AveragePool"
    include_pad = average and bool(node.int_attr("count_include_pad", 0))
    st = strides_of(shape)
    grid = Grid.of(out)
    base = grid.at([st[0], st[1]] + [0] * nd)
    lines = ["float acc = 0.0f;" if average else "float acc = -INFINITY;"]
    if average:
        lines.append("float cnt = 0.0f;")
    inside, padded, at = [], [], [base] if base != "0" else []
    for d in range(nd):
        o = grid.coord(2 + d)
        o = f"({o})" if " " in o else o
        lines.append(f"{'    ' * d}for (int k{d} = 0; k{d} < {kernel[d]}; k{d}++) {{")
        lines.append(f"{'    ' * (d + 1)}const int p{d} = {o} * {strides[d]} - {pads[d]} + "
                     f"k{d} * {dil[d]};")
        size = shape[2 + d]
        inside.append(f"p{d} >= 0 && p{d} < {size}")
        padded.append(f"p{d} >= {-pads[d]} && p{d} < {size + pads[nd + d]}")
        at.append(f"p{d}" if st[2 + d] == 1 else f"p{d} * {st[2 + d]}")
    pad = "    " * nd
    update = ["acc += v;", "cnt += 1.0f;"] if average and not include_pad else \
        ["acc += v;"] if average else ["acc = (v > acc || v != v) ? v : acc;"]
    lines += [f"{pad}if ({' && '.join(inside)}) {{",
              f"{pad}    const float v = x[{' + '.join(at)}];",
              *(f"{pad}    {u}" for u in update), f"{pad}}}"]
    if include_pad:
        lines += [f"{pad}if ({' && '.join(padded)}) {{", f"{pad}    cnt += 1.0f;", f"{pad}}}"]
    lines += [f"{'    ' * d}}}" for d in range(nd - 1, -1, -1)]
    lines.append(f"y[{grid.flat()}] = {'acc / cnt' if average else 'acc'};")
    params = [Param("x", shape), Param("y", out, const=False)]
    comment = (f"{node.op_type} {shape_str(shape)} kernel={kernel} strides={strides} "
               f"dilations={dil} pads={pads} -> {shape_str(out)}")
    return grid_kernel(node, grid, params, {}, "\n".join(lines), ["x"], ["y"], comment)


__all__ = ["POOL_ATTRS", "pool"]
