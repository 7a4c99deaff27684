"""Data movement: Transpose, Concat, Split, Slice, Gather, Expand and the copy operators.

All run one work-item per element on a :class:`Grid` NDRange; the index of the other side is a
sum of the work-item's coordinates times constant strides, so every access but Gather's data
read is affine in the global ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from polyfuse.oplib._common import (
    Grid,
    Node,
    OpKernel,
    Param,
    broadcast_shape,
    broadcast_strides,
    grid_kernel,
    prod,
    shape_str,
    strides_of,
)

#: Operators that only reinterpret the shape: a plain copy (the caller usually aliases them).
COPY_OPS: dict[str, tuple[str, ...]] = {
    "Identity": (),
    "Cast": ("to", "saturate"),
    "Reshape": ("allowzero", "shape"),
    "Flatten": ("axis",),
    "Squeeze": ("axes",),
    "Unsqueeze": ("axes",),
}

#: ONNX TensorProto.FLOAT
_FLOAT = 1


def copy_kernel(node: Node, in_shape: Sequence[int]) -> OpKernel:
    """``y[i] = x[i]`` over the output; the element count must match."""
    out = node.output(0)
    if prod(out) != prod(in_shape):
        raise node.invalid(f"input {tuple(in_shape)} and output {out} differ in element count")
    params = [Param("x", tuple(in_shape)), Param("y", out, const=False)]
    comment = f"{node.op_type} (copy) {shape_str(in_shape)} -> {shape_str(out)}"
    grid = Grid.of(out)
    at = grid.flat()
    return grid_kernel(node, grid, params, {}, f"y[{at}] = x[{at}];", ["x"], ["y"], comment)


def copy(node: Node) -> OpKernel:
    """Identity, Cast (float32 to float32 only), Reshape, Flatten, Squeeze, Unsqueeze."""
    node.check_attrs(COPY_OPS[node.op_type])
    if node.op_type == "Cast":
        to = node.attr("to", _FLOAT)
        if to not in (_FLOAT, "float", "float32", "FLOAT"):
            raise node.unsupported(
                f"attribute 'to'={to!r}: only casts to float32 (1) are supported here"
            )
    return copy_kernel(node, node.input(0))


def transpose(node: Node) -> OpKernel:
    """y[i] = x[Σ coord_d · stride_x[perm[d]]] (default perm reverses the axes)."""
    shape, perm, out = node.transpose_perm()
    st = strides_of(shape)
    grid = Grid.of(out)
    src = grid.at([st[p] for p in perm])
    params = [Param("x", shape), Param("y", out, const=False)]
    comment = f"Transpose {shape_str(shape)} perm={perm}"
    return grid_kernel(
        node, grid, params, {}, f"y[{grid.flat()}] = x[{src}];", ["x"], ["y"], comment
    )


def _range_guard(c: str, lo: int, hi: int, size: int) -> str:
    parts = ([f"{c} >= {lo}"] if lo > 0 else []) + ([f"{c} < {hi}"] if hi < size else [])
    return " && ".join(parts)


def concat(node: Node) -> OpKernel:
    """One work-item per output element; input ``i`` supplies the slab where ``c`` (the output
    coordinate along ``axis``) lies in ``[off_i, off_i + len_i)``."""
    node.check_attrs(["axis"])
    shapes = [node.input(i) for i in range(len(node.input_shapes))]
    if not shapes:
        raise node.invalid("expects at least one input")
    rank = len(shapes[0])
    axis = node.axis(node.int_attr("axis", 0), rank)
    for s in shapes:
        if len(s) != rank or s[:axis] != shapes[0][:axis] or s[axis + 1 :] != shapes[0][axis + 1 :]:
            raise node.invalid(f"inputs {shapes} differ outside axis {axis}")
    total_axis = sum(s[axis] for s in shapes)
    out = shapes[0][:axis] + (total_axis,) + shapes[0][axis + 1 :]
    node.check_output(0, out)
    grid = Grid.of(out)
    lines = []
    if len(shapes) > 1:
        lines.append(f"const int c = {grid.coord(axis)};")
    off = 0
    names = [f"x{i}" for i in range(len(shapes))]
    for name, s in zip(names, shapes):
        n = s[axis]
        own = strides_of(s)
        src = grid.at(own, -off * own[axis])
        guard = _range_guard("c", off, off + n, total_axis) if len(shapes) > 1 else ""
        if guard:
            lines += [f"if ({guard}) {{", f"    y[{grid.flat()}] = {name}[{src}];", "}"]
        else:
            lines.append(f"y[{grid.flat()}] = {name}[{src}];")
        off += n
    params = [Param(nm, s) for nm, s in zip(names, shapes)] + [Param("y", out, const=False)]
    comment = f"Concat {' , '.join(shape_str(s) for s in shapes)} axis={axis}"
    return grid_kernel(node, grid, params, {}, "\n".join(lines), names, ["y"], comment)


def split(node: Node) -> OpKernel:
    """One work-item per input element, written to the output whose slab holds it."""
    node.check_attrs(["axis", "split", "num_outputs"])
    shape = node.input(0)
    rank = len(shape)
    axis = node.axis(node.int_attr("axis", 0), rank)
    outs = [node.output(i) for i in range(len(node.output_shapes))]
    sizes = [o[axis] if len(o) == rank else -1 for o in outs]
    expected_split = node.ints_attr("split")
    if expected_split is not None and list(expected_split) != sizes:
        raise node.invalid(f"attribute 'split' {expected_split} differs from outputs {outs}")
    for o, n in zip(outs, sizes):
        if n < 0 or o != shape[:axis] + (n,) + shape[axis + 1 :]:
            raise node.invalid(f"output shapes {outs} do not split {shape} along axis {axis}")
    if sum(sizes) != shape[axis]:
        raise node.invalid(f"output sizes {sizes} do not add up to {shape[axis]}")
    grid = Grid.of(shape)
    lines = [f"const float v = x[{grid.flat()}];"]
    if len(outs) > 1:
        lines.append(f"const int c = {grid.coord(axis)};")
    off = 0
    names = [f"y{i}" for i in range(len(outs))]
    for name, o, n in zip(names, outs, sizes):
        own = strides_of(o)
        dst = grid.at(own, -off * own[axis])
        guard = _range_guard("c", off, off + n, shape[axis]) if len(outs) > 1 else ""
        if guard:
            lines += [f"if ({guard}) {{", f"    {name}[{dst}] = v;", "}"]
        else:
            lines.append(f"{name}[{dst}] = v;")
        off += n
    params = [Param("x", shape)] + [
        Param(nm, o, const=False) for nm, o in zip(names, outs)
    ]
    comment = f"Split {shape_str(shape)} axis={axis} sizes={sizes}"
    return grid_kernel(node, grid, params, {}, "\n".join(lines), ["x"], names, comment)


def slice_(node: Node) -> OpKernel:
    """y[i] = x[Σ (start_d + coord_d · step_d) · stride_d] after ONNX clamping of
    starts/ends (given as attributes; negative steps allowed)."""
    node.check_attrs(["starts", "ends", "axes", "steps"])
    shape = node.input(0)
    rank = len(shape)
    starts, ends = node.ints_attr("starts"), node.ints_attr("ends")
    if starts is None or ends is None or len(starts) != len(ends):
        raise node.invalid("attributes 'starts' and 'ends' are required and of equal length")
    axes = node.ints_attr("axes") or list(range(len(starts)))
    steps = node.ints_attr("steps") or [1] * len(starts)
    if len(axes) != len(starts) or len(steps) != len(starts):
        raise node.invalid("'starts', 'ends', 'axes' and 'steps' differ in length")
    begin, step = [0] * rank, [1] * rank
    out = list(shape)
    seen: set[int] = set()
    for s, e, a, k in zip(starts, ends, axes, steps):
        a = node.axis(a, rank, "axes")
        if a in seen:
            raise node.invalid(f"attribute 'axes' repeats axis {a}")
        seen.add(a)
        if k == 0:
            raise node.invalid("attribute 'steps' must not contain 0")
        dim = shape[a]
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if k > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
            n = max(0, (e - s + k - 1) // k)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
            n = max(0, (s - e + (-k) - 1) // (-k))
        begin[a], step[a], out[a] = s, k, n
    node.check_output(0, tuple(out))
    st = strides_of(shape)
    base = sum(b * s for b, s in zip(begin, st))
    grid = Grid.of(out)
    src = grid.at([k * s for k, s in zip(step, st)], base)
    params = [Param("x", shape), Param("y", tuple(out), const=False)]
    comment = f"Slice {shape_str(shape)} begin={begin} step={step} -> {shape_str(out)}"
    return grid_kernel(
        node, grid, params, {}, f"y[{grid.flat()}] = x[{src}];", ["x"], ["y"], comment
    )


def gather(node: Node) -> OpKernel:
    """y[o, j, i] = x[o, indices[j], i]; indices are int32 (the caller casts int64), negative
    ones count from the end, and out-of-range ones are clamped so no read leaves the buffer."""
    node.check_attrs(["axis"])
    data, ind = node.input(0), node.input(1)
    rank = len(data)
    if rank == 0:
        raise node.invalid("data must have rank >= 1")
    axis = node.axis(node.int_attr("axis", 0), rank)
    out = data[:axis] + ind + data[axis + 1 :]
    node.check_output(0, out)
    inner, size = prod(data[axis + 1 :]), data[axis]
    st, ist = strides_of(data), strides_of(ind)
    k = len(ind)
    grid = Grid.of(out)
    j = grid.at([0] * axis + list(ist) + [0] * (len(out) - axis - k))
    src = grid.at(list(st[:axis]) + [0] * k + list(st[axis + 1 :]))
    pos = "idx" if inner == 1 else f"idx * {inner}"
    lines = [
        f"const int raw = indices[{j}];",
        f"const int idx = clamp(raw < 0 ? raw + {size} : raw, 0, {size - 1});",
        f"y[{grid.flat()}] = x[{pos if src == '0' else f'{src} + {pos}'}];",
    ]
    params = [Param("x", data), Param("indices", ind, ctype="int"), Param("y", out, const=False)]
    comment = f"Gather {shape_str(data)} indices {shape_str(ind)} axis={axis}"
    return grid_kernel(
        node, grid, params, {}, "\n".join(lines), ["x", "indices"], ["y"], comment,
        {"indices": "int32"},
    )


def expand(node: Node) -> OpKernel:
    """Broadcast the input to the output shape (the shape input is static: output_shapes)."""
    node.check_attrs(["shape"])
    shape, out = node.input(0), node.output(0)
    target = node.ints_attr("shape")
    if target is not None and broadcast_shape(node, [shape, target]) != out:
        raise node.invalid(f"output {out} is not the broadcast of {shape} and shape {target}")
    grid = Grid.of(out)
    src = grid.at(broadcast_strides(node, shape, out))
    params = [Param("x", shape), Param("y", out, const=False)]
    comment = f"Expand {shape_str(shape)} -> {shape_str(out)}"
    return grid_kernel(
        node, grid, params, {}, f"y[{grid.flat()}] = x[{src}];", ["x"], ["y"], comment
    )
