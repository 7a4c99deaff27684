"""AveragePool and MaxPool: one work-item per output element, a counted loop per window axis.

The window's input position along each spatial axis is affine in the work-item's coordinate
and the loop iterator (``o * stride - pad_begin + k * dilation``); padding is a guard on that
position, never a clamped subscript, so the front-end models every read exactly (as for Conv).

Where the kernel variant keeps rows in a work-item (``row_accumulators``: the ``blocked``
variant, for CPUs) a 2-D pool runs one work-item per output row instead (:func:`_pool_rows`):
the window's rows are first reduced column by column over the whole input row, contiguous
loads a loop vectorizes, and the output row then reduces that row's windows.
"""

from __future__ import annotations

from collections.abc import Sequence

from polyfuse.oplib._common import (
    Grid,
    Node,
    OpKernel,
    Param,
    grid_kernel,
    halved_lanes,
    shape_str,
    strides_of,
    vector_lanes,
)
from polyfuse.oplib.linalg import conv_pads

#: the longest input row the row form of a 2-D pool keeps in a work-item's private array
ROW_FORM_MAX_WIDTH = 2048
#: the widest window whose columns the row form writes out one by one
UNROLLED_WINDOW = 8

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
    comment = (f"{node.op_type} {shape_str(shape)} kernel={kernel} strides={strides} "
               f"dilations={dil} pads={pads} -> {shape_str(out)}")
    if nd == 2 and node.variant.row_accumulators > 0 and shape[3] <= ROW_FORM_MAX_WIDTH:
        return _pool_rows(node, shape, out, kernel, strides, dil, pads, include_pad, comment)
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
    return grid_kernel(node, grid, params, {}, "\n".join(lines), ["x"], ["y"], comment)


def _pool_rows(node: Node, shape: tuple[int, ...], out: tuple[int, ...], kernel: Sequence[int],
               strides: Sequence[int], dil: Sequence[int], pads: Sequence[int],
               include_pad: bool, comment: str) -> OpKernel:
    """A 2-D pool, one work-item per output row: the window's valid input rows reduced into a
    private row ``m`` (a loop over the row's contiguous columns, which the device compiler
    vectorizes), then each output column reduces ``m`` over its window's columns.  The window
    is a rectangle, so the maximum (or sum) over it is that of its columns' maxima (sums), and
    an average's count is its valid rows times its valid columns.  MaxPool 3x3 stride 2 of
    64 x 112 x 112 (ResNet-50's stem): 1.6-3.0 ms one output per work-item, 0.20 ms in rows
    (onnxruntime 0.11; PoCL 3.1 ``basic``).  Sums are added in another order than the
    one-output form's (within rounding); NaN still propagates through a maximum."""
    height, width = shape[2], shape[3]
    st, ost = strides_of(shape), strides_of(out)
    grid = Grid.of(out[:3])
    average = node.op_type == "AveragePool"
    init = "0.0f" if average else "-INFINITY"

    def update(acc: str, v: str) -> str:
        """``acc`` updated with the float named ``v``; ``acc`` read once, unconditionally (an
        array element read in one arm of a ``?:`` is a data-dependent read the front-end
        cannot model exactly)."""
        if average:
            return f"{acc} += {v};"
        return f"{{ const float a = {acc}; {acc} = ({v} > a || {v} != {v}) ? {v} : a; }}"

    oh = grid.coord(2)
    oh = f"({oh})" if " " in oh else oh
    base = grid.at([st[0], st[1], 0])
    row = f"{base} + p0 * {width}" if base != "0" else f"p0 * {width}"
    ystart = grid.at([ost[0], ost[1], ost[2]])
    y_at = f"{ystart} + ow" if ystart != "0" else "ow"
    width_v = vector_lanes(node.variant.vector_width, width)
    if not average and _halving_rows(width, out[3], kernel[0], kernel[1], strides[1], dil[1],
                                     pads[1], width_v):
        lines = _max_rows_in_vectors(width, width_v, kernel[1], oh, strides[0], pads[0],
                                     kernel[0], dil[0], height, row, ystart)
        params = [Param("x", shape), Param("y", out, const=False)]
        return grid_kernel(node, grid, params, {}, "\n".join(lines), ["x"], ["y"],
                           comment + f", one work-item per output row in float{width_v}")
    lines = [f"float m[{width}];",
             f"for (int j = 0; j < {width}; j++) {{", f"    m[j] = {init};", "}"]
    if average:
        lines.append("float rows = 0.0f;")
    lines += [f"for (int k0 = 0; k0 < {kernel[0]}; k0++) {{",
              f"    const int p0 = {oh} * {strides[0]} - {pads[0]} + k0 * {dil[0]};",
              f"    if (p0 >= 0 && p0 < {height}) {{",
              f"        for (int j = 0; j < {width}; j++) {{",
              f"            const float v = x[{row} + j];",
              f"            {update('m[j]', 'v')}", "        }"]
    if average and not include_pad:
        lines.append("        rows += 1.0f;")
    lines.append("    }")
    if include_pad:
        lines += [f"    if (p0 >= {-pads[0]} && p0 < {height + pads[2]}) {{",
                  "        rows += 1.0f;", "    }"]
    lines.append("}")
    # the output columns whose whole window lies inside the row run without guards
    first = -(-pads[1] // strides[1])
    last = (width - 1 + pads[1] - (kernel[1] - 1) * dil[1]) // strides[1]
    first, last = min(max(first, 0), out[3]), max(min(last, out[3] - 1), -1)
    spans = [(0, first, True), (first, last + 1, False), (last + 1, out[3], True)] \
        if first <= last else [(0, out[3], True)]
    for lo, hi, guarded in spans:
        if lo >= hi:
            continue
        lines += [f"for (int ow = {lo}; ow < {hi}; ow++) {{", f"    float acc = {init};"]
        if average:
            lines.append("    float cols = 0.0f;")
        # the window's columns written out (at most UNROLLED_WINDOW): as a loop of three
        # the ResNet stem's pool ran 2.4x slower
        unrolled = kernel[1] <= UNROLLED_WINDOW
        terms = [str(k * dil[1]) for k in range(kernel[1])] if unrolled else [f"k1 * {dil[1]}"]
        if not unrolled:
            lines.append(f"    for (int k1 = 0; k1 < {kernel[1]}; k1++) {{")
        for term in terms:
            body = [f"const int p1 = ow * {strides[1]} - {pads[1]} + {term};",
                    "const float w = m[p1];", update("acc", "w")]
            if average and not include_pad:
                body.append("cols += 1.0f;")
            if guarded:
                body = [body[0], f"if (p1 >= 0 && p1 < {width}) {{",
                        *(f"    {b}" for b in body[1:]), "}"]
            if include_pad:
                body += [f"if (p1 >= {-pads[1]} && p1 < {width + pads[3]}) {{",
                         "    cols += 1.0f;", "}"]
            lines += ["    {", *(f"        {b}" for b in body), "    }"]
        if not unrolled:
            lines.append("    }")
        lines += [f"    y[{y_at}] = {'acc / (rows * cols)' if average else 'acc'};", "}"]
    params = [Param("x", shape), Param("y", out, const=False)]
    return grid_kernel(node, grid, params, {}, "\n".join(lines), ["x"], ["y"],
                       comment + ", one work-item per output row")


def _halving_rows(width: int, out_width: int, kh: int, kw: int, stride: int, dil: int,
                  pad: int, vector_width: int) -> bool:
    """Whether a row form's columns halve in OpenCL vectors of ``vector_width`` lanes
    (:func:`_max_rows_in_vectors`; 1: none divides the row): stride 2, a window of 2 columns
    unpadded or of 3 padded by one on the left (the pools of ResNet stems, VGG and U-Nets),
    every output column's window inside the row, the window's rows few enough to write
    out."""
    return (vector_width > 1 and stride == 2 and dil == 1 and (kw, pad) in ((2, 0), (3, 1))
            and out_width * 2 == width and kh <= UNROLLED_WINDOW)


def _max_rows_in_vectors(width: int, vector_width: int, kw: int, oh: str, stride0: int,
                         pad0: int, kh: int, dil0: int, height: int, row: str,
                         ystart: str) -> list[str]:
    """A MaxPool row form in ``float<vector_width>`` vectors: the window's rows reduced into
    the row's vectors ``m_<c>``, then each vector's even and odd columns (``.even``/``.odd``)
    are the output's window columns ``2o`` and ``2o + 1``, the odd lanes shifted by one lane
    (the last of the vector before carried in ``prev``) its column ``2o - 1``.  Why: written
    as a loop over the private row, the columns two apart did not vectorize (ResNet-50's stem
    pool, 64 x 112 x 112: 145 us against 72 in vectors, PoCL 3.1 ``basic``; 79 against 41 on
    ``pthread``).  Each maximum is taken in the scalar form's order (rows, then columns
    ``2o - 1``, ``2o``, ``2o + 1``) with its NaN rule, so the results are the same bits."""
    vt, half = f"float{vector_width}", vector_width // 2
    ht = f"float{half}"
    chunks = width // vector_width

    def update(acc: str, v: str) -> str:
        return f"select({acc}, {v}, ({v} > {acc}) | ({v} != {v}))"

    lines = [f"{vt} m_{c} = ({vt})(-INFINITY);" for c in range(chunks)]
    # the window's rows written out: in a loop the performance model (rightly, for scalar
    # code) charges each lane of a vector as a scalar loop access
    for k0 in range(kh):
        lines += ["{", f"    const int p0 = {oh} * {stride0} - {pad0} + {k0 * dil0};",
                  f"    if (p0 >= 0 && p0 < {height}) {{",
                  f"        __global const float *xr = x + ({row});"]
        for c in range(chunks):
            lines += [f"        const {vt} v_{c} = vload{vector_width}({c}, xr);",
                      f"        m_{c} = {update(f'm_{c}', f'v_{c}')};"]
        lines += ["    }", "}"]
    lines.append(f"__global float *yr = y + {ystart};" if ystart != "0"
                 else "__global float *yr = y;")
    if kw == 3:
        lines.append("float prev = -INFINITY;")
    for c in range(chunks):
        lines += halved_lanes(f"m_{c}", c, half, left=kw == 3)
        if kw == 3:  # the maximum of the window's first column alone is itself
            lines += [f"{ht} r_{c} = l_{c};", f"r_{c} = {update(f'r_{c}', f'e_{c}')};"]
        else:
            lines.append(f"{ht} r_{c} = e_{c};")
        lines += [f"r_{c} = {update(f'r_{c}', f'o_{c}')};",
                  f"vstore{half}(r_{c}, {c}, yr);"]
    return lines


__all__ = ["POOL_ATTRS", "pool"]
