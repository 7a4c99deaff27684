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
    flt,
    grid_kernel,
    prod,
    shape_str,
    strides_of,
)

#: Operators that only reinterpret the shape: a plain copy (the caller usually aliases them).
COPY_OPS: dict[str, tuple[str, ...]] = {
    "Identity": (),
    "Cast": ("to", "saturate"),
    "CastLike": ("saturate",),
    "Reshape": ("allowzero", "shape"),
    "Flatten": ("axis",),
    "Squeeze": ("axes",),
    "Unsqueeze": ("axes",),
}

#: ONNX TensorProto.FLOAT and FLOAT16, and their names
_FLOATS = (1, 10, "float", "float32", "FLOAT", "float16", "FLOAT16")


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
    """Identity, Cast and CastLike (float32 and float16: the caller gives float16 buffers the
    type ``half``, :func:`~polyfuse.oplib._common.with_half`), Reshape, Flatten, Squeeze,
    Unsqueeze."""
    node.check_attrs(COPY_OPS[node.op_type])
    if node.op_type == "Cast":
        to = node.attr("to", 1)
        if to not in _FLOATS:
            raise node.unsupported(
                f"attribute 'to'={to!r}: only casts to float32 (1) or float16 (10) are "
                "supported here"
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


def pad(node: Node) -> OpKernel:
    """Pad in ``constant``, ``edge`` and ``reflect`` mode (``pads``, ``constant_value`` and
    ``axes`` static); negative pads crop.  The source position along each axis is the output
    coordinate minus the begin pad, clamped (edge) or mirrored (reflect) with ``clamp`` and
    ``?:`` on integers: piecewise affine, so modelled exactly."""
    node.check_attrs(["mode", "pads", "constant_value", "axes"])
    shape = node.input(0)
    rank = len(shape)
    mode = str(node.attr("mode", "constant"))
    if mode not in ("constant", "edge", "reflect"):
        raise node.unsupported(f"attribute 'mode'={mode!r} is not supported (constant, edge, "
                               "reflect)")
    given = node.ints_attr("pads")
    axes = [node.axis(a, rank, "axes") for a in node.ints_attr("axes") or range(rank)]
    if given is None or len(given) != 2 * len(axes):
        raise node.invalid(f"'pads' must give {2 * len(axes)} values, got {given}")
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = given[i], given[len(axes) + i]
    value = node.attr("constant_value", 0.0)
    value = float(value[0] if isinstance(value, (list, tuple)) and value else value or 0.0)
    out = tuple(n + b + e for n, b, e in zip(shape, begin, end))
    if min(out, default=1) < 1:
        raise node.invalid(f"pads {given} leave no element of {shape}")
    node.check_output(0, out)
    grid = Grid.of(out)
    st = strides_of(shape)
    terms, inside = [], []
    for d, n in enumerate(shape):
        if n == 1 and mode != "constant" or out[d] == 1 and begin[d] == 0:
            continue  # edge/reflect of a unit axis, or an unpadded unit axis: index 0
        if mode == "reflect" and max(begin[d], end[d]) >= n:
            raise node.unsupported(f"reflect pads {given} reach past the opposite edge of "
                                   f"axis {d} ({n} elements)")
        c = grid.coord(d)
        t = f"({c} - {begin[d]})" if begin[d] > 0 else f"({c} + {-begin[d]})" if begin[d] else c
        if mode == "constant":
            if begin[d] > 0:
                inside.append(f"{t} >= 0")
            if end[d] > 0:
                inside.append(f"{t} < {n}")
            src = t
        elif mode == "edge":
            src = f"clamp({t}, 0, {n - 1})" if begin[d] > 0 or end[d] > 0 else t
        else:
            src = f"({t} < 0 ? -{t} : {t} > {n - 1} ? {2 * (n - 1)} - {t} : {t})"
        terms.append(src if st[d] == 1 else f"({src}) * {st[d]}")
    src = " + ".join(terms) or "0"
    if inside:
        # the read must not run outside the input: a guarded statement, not a select
        stmt = (f"if ({' && '.join(inside)}) {{\n    y[{grid.flat()}] = x[{src}];\n}} else {{\n"
                f"    y[{grid.flat()}] = {flt(value)};\n}}")
    else:
        stmt = f"y[{grid.flat()}] = x[{src}];"
    params = [Param("x", shape), Param("y", out, const=False)]
    comment = f"Pad {shape_str(shape)} mode={mode} pads={given} -> {shape_str(out)}"
    return grid_kernel(node, grid, params, {}, stmt, ["x"], ["y"], comment)


#: Resize's supported coordinate transformations and nearest rounding modes.
_RESIZE_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_position(mode: str, n: int, m: int) -> tuple[int, int, int]:
    """``(a, b, den)``: output coordinate ``o`` of an axis of ``n`` elements resized to ``m``
    reads source position ``(a * o + b) / den``."""
    if mode == "asymmetric":
        return n, 0, m
    if mode == "align_corners":
        return (n - 1, 0, m - 1) if m > 1 else (0, 0, 1)
    if mode == "pytorch_half_pixel" and m == 1:
        return 0, 0, 1
    return 2 * n, n - m, 2 * m  # half_pixel: ((o + 0.5) * n / m) - 0.5


def _floor_div(num: str, low: int, den: int) -> str:
    """``floor(num / den)`` for ``num >= low`` as C integer arithmetic (C's ``/`` truncates:
    shift the numerator to non-negative first)."""
    shift = -(low // den) if low < 0 else 0
    if den == 1:
        return num
    if shift:
        return f"(({num} + {shift * den}) / {den} - {shift})"
    return f"(({num}) / {den})"


def resize(node: Node) -> OpKernel:
    """Resize (and Upsample's semantics) in ``nearest`` and ``linear`` mode.

    Every source position is computed in exact integer arithmetic from the output coordinate
    (the scale is ``m / n``, so ``scales`` must give the output size exactly): the nearest index
    and linear's floor index are floor divisions by constants, clamped to the axis, which the
    front-end models exactly; linear's weights are the remainders as floats.  onnxruntime
    computes the positions in float32, so the two can differ where a position is within
    float32 rounding of a tie of ``round_prefer_*``.
    """
    node.check_attrs(["mode", "coordinate_transformation_mode", "nearest_mode", "roi",
                      "scales", "sizes", "cubic_coeff_a", "exclude_outside",
                      "extrapolation_value", "antialias", "axes", "keep_aspect_ratio_policy"])
    shape, out = node.input(0), node.output(0)
    rank = len(shape)
    mode = str(node.attr("mode", "nearest"))
    coord = str(node.attr("coordinate_transformation_mode", "half_pixel"))
    nearest = str(node.attr("nearest_mode", "round_prefer_floor"))
    if mode not in ("nearest", "linear"):
        raise node.unsupported(f"attribute 'mode'={mode!r} is not supported (nearest, linear)")
    if coord not in _RESIZE_COORDS:
        raise node.unsupported(f"attribute 'coordinate_transformation_mode'={coord!r} is not "
                               f"supported ({', '.join(_RESIZE_COORDS)})")
    if nearest not in _NEAREST_MODES:
        raise node.unsupported(f"attribute 'nearest_mode'={nearest!r} is not supported")
    for key, default in (("antialias", 0), ("exclude_outside", 0)):
        if node.int_attr(key, default) != default:
            raise node.unsupported(f"attribute '{key}' other than {default} is not supported")
    if node.attr("axes") is not None:
        raise node.unsupported("attribute 'axes' is not supported (give every axis)")
    if str(node.attr("keep_aspect_ratio_policy", "stretch")) != "stretch":
        raise node.unsupported("attribute 'keep_aspect_ratio_policy' other than 'stretch' is "
                               "not supported")
    if len(out) != rank:
        raise node.invalid(f"output {out} and input {shape} differ in rank")
    scales = node.attr("scales")
    if scales:
        scales = [float(v) for v in scales]
        for d, (n, m, sc) in enumerate(zip(shape, out, scales)):
            if abs(sc * n - m) > 1e-4 * m:
                raise node.unsupported(f"scale {sc} of axis {d} does not give its output size "
                                       f"{m} from {n} exactly (only scales m/n are supported)")
    st = strides_of(shape)
    grid = Grid.of(out)
    lines: list[str] = []
    fixed: list[str] = []  # subscript terms of the axes that are not interpolated
    lerp: list[tuple[int, str]] = []  # (axis, its floor-index variable) of linear axes
    for d, (n, m) in enumerate(zip(shape, out)):
        c = grid.coord(d)
        a, b, den = _source_position(coord, n, m)
        if n == m or n == 1:  # every mode maps o to o, or everything to 0
            if n != 1:
                fixed.append(c if st[d] == 1 else f"({c}) * {st[d]}")
            continue
        num = f"{c} * {a} + {b}" if b > 0 else f"{c} * {a} - {-b}" if b else f"{c} * {a}"
        if mode == "nearest":
            # as floor((mult * (a * o + b) + add) / div): ceil(x - 1/2), floor(x + 1/2),
            # floor(x), ceil(x) of x = (a * o + b) / den
            mult, add, div = {"round_prefer_floor": (2, den - 1, 2 * den),
                              "round_prefer_ceil": (2, den, 2 * den),
                              "floor": (1, 0, den), "ceil": (1, den - 1, den)}[nearest]
            if mult != 1:
                num = f"2 * ({num})"
            num, low = (f"{num} + {add}" if add else num), mult * b + add
            idx = f"clamp({_floor_div(num, low, div)}, 0, {n - 1})"
            fixed.append(idx if st[d] == 1 else f"({idx}) * {st[d]}")
            continue
        # linear: the position clamped to [0, n - 1], its floor index and the remainder
        lines += [f"const int q{d} = clamp({num}, 0, {(n - 1) * den});",
                  f"const int f{d} = q{d} / {den};",
                  f"const float w{d} = (float)(q{d} - f{d} * {den}) / {float(den)}f;"]
        lerp.append((d, f"f{d}"))
    if len(lerp) > 3:
        raise node.unsupported(f"linear resize of {len(lerp)} axes is not supported (at most 3)")
    base = " + ".join(fixed)
    if not lerp:
        value = f"x[{base or '0'}]"
    else:
        terms = []
        for corner in range(1 << len(lerp)):
            sub, weight = list(fixed), []
            for bit, (d, f) in enumerate(lerp):
                hi = corner >> bit & 1
                pos = f"min({f} + 1, {shape[d] - 1})" if hi else f
                sub.append(pos if st[d] == 1 else f"{pos} * {st[d]}")
                weight.append(f"w{d}" if hi else f"(1.0f - w{d})")
            # one load per statement: two corners may be the same element at the edge
            lines.append(f"const float c{corner} = x[{' + '.join(sub)}];")
            terms.append(f"{' * '.join(weight)} * c{corner}")
        value = " + ".join(terms)
    lines.append(f"y[{grid.flat()}] = {value};")
    params = [Param("x", shape), Param("y", out, const=False)]
    comment = f"Resize {shape_str(shape)} -> {shape_str(out)} mode={mode} coordinates={coord}"
    return grid_kernel(node, grid, params, {}, "\n".join(lines), ["x"], ["y"], comment)
