"""Row reductions: Softmax, LayerNormalization, the Reduce* operators and global pooling.

One work-group per reduced row (``get_group_id(0)`` = row), ``LANES`` work-items striding over the
row in a counted loop of ``CHUNKS`` steps with a guarded load, then a tree reduction in ``__local``
memory.  The tree is unrolled at generation time (``if (lane < s)`` for each constant ``s``, each
followed by a barrier outside the condition), so it stays affine and barriers stay uniform.

Where the kernel variant asks for it (:attr:`~polyfuse.core.program.KernelVariant.row_accumulators`,
the CPU's ``blocked`` form), Softmax, LayerNormalization and the Reduce* over trailing axes
(global pooling too) run one work-item per row instead: a CPU runs a work-group as a loop over
its work-items between barriers, so each tree level costs a pass over the group.  Each pass
over the row is then a ``long``-counted loop of steps into named partial results (a float
reduction into one accumulator does not vectorize without reassociation; independent partials
do), the partials combined by an unrolled tree after the loop, the rest of the row in a tail
loop (:func:`_row_pass`).
"""

from __future__ import annotations

from collections.abc import Callable

from polyfuse.oplib._common import (
    REDUCTION_MAX_LANES,
    Grid,
    Node,
    OpKernel,
    Param,
    broadcast_strides,
    flt,
    grid_kernel,
    index_expr,
    make_kernel,
    pow2_ceil,
    pow2_floor,
    prod,
    render,
    shape_str,
    strides_of,
    vector_lanes,
)
from polyfuse.oplib.movement import copy_kernel


def lanes_for(node: Node, row_length: int) -> int:
    """Work-group size for rows of ``row_length``: a power of two fitting the device, at most
    the kernel variant's lanes (devices that run a work-group as a loop, CPUs, pay per barrier
    and per tree level, so their variant uses few lanes, each summing a longer stretch)."""
    cap = min(REDUCTION_MAX_LANES, node.variant.reduction_lanes, node.max_work_group_size,
              node.local_mem_size // 4)
    return max(1, min(pow2_floor(cap), pow2_ceil(max(row_length, 1))))


def _tree(lanes: int, combine: str) -> str:
    """Unrolled tree reduction of ``red[0..lanes)`` into ``red[0]`` (``combine`` of a, b)."""
    lines = ["red[lane] = part;", "barrier(CLK_LOCAL_MEM_FENCE);"]
    s = lanes // 2
    while s >= 1:
        if combine.count("{a}") + combine.count("{b}") > 2:  # each operand loaded once
            lines += [f"if (lane < {s}) {{", "    const float a = red[lane];",
                      f"    const float b = red[lane + {s}];",
                      f"    red[lane] = {combine.format(a='a', b='b')};", "}"]
        else:
            expr = combine.format(a="red[lane]", b=f"red[lane + {s}]")
            lines += [f"if (lane < {s}) {{", f"    red[lane] = {expr};", "}"]
        lines.append("barrier(CLK_LOCAL_MEM_FENCE);")
        s //= 2
    return "\n".join(lines)


def _row_loop(init: str, update: str, declare: bool = True) -> str:
    """A private partial over this lane's elements ``j = k * LANES + lane`` of the row."""
    return (
        f"{'float ' if declare else ''}part = {init};\n"
        "for (int k = 0; k < CHUNKS; k++) {\n"
        "    const int j = k * LANES + lane;\n"
        "    if (j < ROWLEN) {\n"
        f"        {update}\n"
        "    }\n"
        "}"
    )


def _row_pass(acc: str, init: str, update: Callable[[str, str], str], combine: str,
              length: int, partials: int) -> str:
    """One work-item's reduction of its row into ``{acc}0``: ``update(name, j)`` folds element
    ``j`` into the partial ``name``; ``partials`` (a power of two, at most the row) partials
    take ``j = k * partials + i``, a tail loop the elements after the last whole step."""
    names = [f"{acc}{i}" for i in range(partials)]
    steps = length // partials
    lines = [f"float {n} = {init};" for n in names]
    lines.append(f"for (long k = 0; k < {steps}; k++) {{")
    lines += ["    " + update(n, f"k * {partials} + {i}" if partials > 1 else "k")
              for i, n in enumerate(names)]
    lines.append("}")
    if steps * partials < length:
        lines += [f"for (long j = {steps * partials}; j < ROWLEN; j++) {{",
                  "    " + update(names[0], "j"), "}"]
    while len(names) > 1:
        half = len(names) // 2
        lines += [f"{a} = {combine.format(a=a, b=b)};" for a, b in zip(names, names[half:])]
        names = names[:half]
    return "\n".join(lines)


def _row_partials(node: Node, length: int) -> int:
    """Partial results per pass of the one-work-item-per-row form (0: not that form)."""
    return min(pow2_floor(node.variant.row_accumulators), pow2_floor(length)) \
        if node.variant.row_accumulators > 0 else 0


def _row_element(base: str, step: int) -> Callable[[str], str]:
    """Element ``j`` of the row starting at ``base`` whose elements lie ``step`` words apart."""
    def at(j: str) -> str:
        if j == "0":
            return base
        term = j if step == 1 else (f"({j}) * {step}" if " " in j else f"{j} * {step}")
        return term if base == "0" else f"{base} + {term}"
    return at


def _row_kernel(node: Node, grid: Grid, length: int, params: list[Param], body: str,
                inputs: list[str], outputs: list[str], comment: str) -> OpKernel:
    """One work-item per row of ``grid`` (the row's start from :meth:`Grid.at`)."""
    return grid_kernel(node, grid, params, {"ROWLEN": length}, body, inputs, outputs,
                       comment + ", one work-item per row")


def _reduction_kernel(
    node: Node,
    rows: int,
    row_length: int,
    defines: dict[str, int | str],
    params: list[Param],
    body: str,
    inputs: list[str],
    outputs: list[str],
    comment: str,
) -> OpKernel:
    lanes = lanes_for(node, row_length)
    defines = {
        "ROWLEN": row_length,
        "LANES": lanes,
        "CHUNKS": (row_length + lanes - 1) // lanes,
        **defines,
    }
    head = (
        "__local float red[LANES];\n"
        "const int row = get_group_id(0);\n"
        "const int lane = get_local_id(0);\n"
    )
    source = render(node, defines, params, head + body, comment)
    return make_kernel(node, source, (rows * lanes,), (lanes,), inputs, outputs)


#: a reduction over leading axes this short (a split-K product's parts) is written out, one
#: statement per element, so that a CPU compiler vectorizes it across work-items: a loop
#: around it kept each work-item scalar (GPT-2's 4 x 256 x 768 split-K sum with its bias and
#: residual: 0.32 ms looped, 0.043 ms written out, PoCL 3.1 ``basic``)
UNROLLED_LEADING = 16


def _leading_reduction(node: Node, shape: tuple[int, ...], out: tuple[int, ...], rows: int,
                       length: int, kind: str) -> OpKernel:
    """A reduction over leading axes as one work-item per output: element ``j`` of its
    reduced stretch lies ``j * ROWS`` words on (the module docstring says when), written out
    up to :data:`UNROLLED_LEADING` elements."""
    init, combine, finish = REDUCTIONS[kind]
    grid = Grid.of(out)
    flat = grid.flat()

    def update(j: str, v: str) -> str:
        if combine == "{a} + {b}":
            return f"part += x[{j} * ROWS + {flat}];"
        return (f"const float {v} = x[{j} * ROWS + {flat}];\n"
                f"part = {combine.format(a='part', b=v)};")
    if length <= UNROLLED_LEADING:
        steps = "\n".join(update(str(j), f"v{j}") for j in range(length))
        stmts = f"float part = {init};\n{steps}\ny[{flat}] = {finish.format(total='part')};"
    else:
        body = update("j", "v").replace("\n", "\n    ")
        stmts = (f"float part = {init};\nfor (int j = 0; j < ROWLEN; j++) {{\n    {body}\n}}\n"
                 f"y[{flat}] = {finish.format(total='part')};")
    params = [Param("x", shape), Param("y", out, const=False)]
    comment = (f"{node.op_type} {shape_str(shape)} over its {length} leading elements "
               f"-> {shape_str(out)}, one work-item per output")
    return grid_kernel(node, grid, params, {"ROWS": rows, "ROWLEN": length}, stmts, ["x"],
                       ["y"], comment)


def _lanes_folded(vector: str, width: int, combine: str, result: str) -> list[str]:
    """Statements folding the ``width`` lanes of ``vector`` into the float ``result`` with
    ``combine`` (of a, b): halves (``.lo``/``.hi``) down to one lane."""
    lines, current = [], vector
    while width > 2:
        width //= 2
        folded = f"{vector}{width}"
        lines.append(f"const float{width} {folded} = "
                     f"{combine.format(a=f'{current}.lo', b=f'{current}.hi')};")
        current = folded
    lines.append(f"const float {result} = "
                 f"{combine.format(a=f'{current}.s0', b=f'{current}.s1')};")
    return lines


def _vector_softmax_body(start: str, length: int, width: int) -> str:
    """A Softmax row in ``float<width>`` vectors: the maximum, then each vector's
    exponentials stored and summed in the same pass, then the row scaled by the sum's
    reciprocal.  Why: LLVM's AVX-512 tuning keeps the named partials' loops 256 bits wide,
    and each pass streams the row again; GPT-2's 3072 rows of 256: 0.80 ms in the session
    (docs/performance.md)."""
    vt, steps = f"float{width}", length // width
    return "\n".join([
        f"__global const float *xr = x + {start};" if start != "0" else
        "__global const float *xr = x;",
        f"__global float *yr = y + {start};" if start != "0" else "__global float *yr = y;",
        f"{vt} m = vload{width}(0, xr);",
        f"for (long k = 1; k < {steps}; k++) {{",
        f"    m = fmax(m, vload{width}(k, xr));",
        "}",
        *_lanes_folded("m", width, "fmax({a}, {b})", "row_max"),
        f"{vt} s = ({vt})(0.0f);",
        f"for (long k = 0; k < {steps}; k++) {{",
        f"    const {vt} e = exp(vload{width}(k, xr) - row_max);",
        f"    vstore{width}(e, k, yr);",
        "    s += e;",
        "}",
        *_lanes_folded("s", width, "{a} + {b}", "row_sum"),
        "const float row_scale = 1.0f / row_sum;",
        f"for (long k = 0; k < {steps}; k++) {{",
        f"    vstore{width}(vload{width}(k, yr) * row_scale, k, yr);",
        "}",
    ])


def softmax(node: Node) -> OpKernel:
    """Softmax along one axis (opset 13 semantics), stable: exp(x - max) / sum."""
    node.check_attrs(["axis"])
    shape = node.input(0)
    node.check_output(0, shape)
    rank = len(shape)
    if rank == 0:
        raise node.invalid("input must have rank >= 1")
    axis = node.axis(node.int_attr("axis", -1), rank)
    length, inner = shape[axis], prod(shape[axis + 1 :])
    rows = prod(shape) // length
    params = [Param("x", shape), Param("y", shape, const=False)]
    comment = f"Softmax {shape_str(shape)} axis={axis}"
    partials = _row_partials(node, length)
    width = vector_lanes(node.variant.vector_width, length) if inner == 1 else 1
    if partials and width > 1:
        grid = Grid.of((rows,))
        return _row_kernel(node, grid, length, params,
                           _vector_softmax_body(grid.at((length,)), length, width),
                           ["x"], ["y"], comment)
    if partials:
        grid = Grid.of((rows // inner, inner))
        at = _row_element(grid.at((length * inner, 1)), inner)
        body = "\n".join([
            _row_pass("m", "-INFINITY", lambda p, j: f"{p} = fmax({p}, x[{at(j)}]);",
                      "fmax({a}, {b})", length, partials),
            "const float row_max = m0;",
            # the exponentials in a loop of their own (no reduction in it: it vectorizes)
            "for (long j = 0; j < ROWLEN; j++) {",
            f"    y[{at('j')}] = exp(x[{at('j')}] - row_max);",
            "}",
            _row_pass("s", "0.0f", lambda p, j: f"{p} += y[{at(j)}];", "{a} + {b}", length,
                      partials),
            "const float row_sum = s0;",
            "for (long j = 0; j < ROWLEN; j++) {",
            f"    y[{at('j')}] = y[{at('j')}] / row_sum;",
            "}",
        ])
        return _row_kernel(node, grid, length, params, body, ["x"], ["y"], comment)
    if inner > 1:
        elem = index_expr("row", (rows // inner, inner), (length * inner, 1)) + " + j * INNER"
    else:
        elem = "row * ROWLEN + j" if rows > 1 else "j"
    body = "\n".join(
        [
            _row_loop("-INFINITY", f"part = fmax(part, x[{elem}]);"),
            _tree(lanes_for(node, length), "fmax({a}, {b})"),
            "const float row_max = red[0];",
            "barrier(CLK_LOCAL_MEM_FENCE);",
            # each lane keeps its exponentials in y (its own elements) and scales them once
            # the sum is known: one exp per element
            _row_loop("0.0f", f"const float e = exp(x[{elem}] - row_max);\n"
                      f"        y[{elem}] = e;\n        part += e;", declare=False),
            _tree(lanes_for(node, length), "{a} + {b}"),
            "const float row_sum = red[0];",
            "for (int k = 0; k < CHUNKS; k++) {",
            "    const int j = k * LANES + lane;",
            "    if (j < ROWLEN) {",
            f"        y[{elem}] = y[{elem}] / row_sum;",
            "    }",
            "}",
        ]
    )
    return _reduction_kernel(
        node, rows, length, {"INNER": inner}, params, body, ["x"], ["y"], comment
    )


def layer_norm(node: Node) -> OpKernel:
    """LayerNormalization over ``shape[axis:]`` with scale, optional bias and the optional
    Mean / InvStdDev outputs (shape ``shape[:axis] + [1] * (rank - axis)``)."""
    node.check_attrs(["axis", "epsilon", "stash_type"])
    if node.int_attr("stash_type", 1) != 1:
        raise node.unsupported("attribute 'stash_type' other than 1 (float32) is not supported")
    shape = node.input(0)
    rank = len(shape)
    if rank == 0:
        raise node.invalid("input must have rank >= 1")
    axis = node.axis(node.int_attr("axis", -1), rank)
    eps = float(node.attr("epsilon", 1e-5))
    norm_shape = shape[axis:]
    length, rows = prod(norm_shape), prod(shape[:axis])
    node.check_output(0, shape)
    stat_shape = shape[:axis] + (1,) * (rank - axis)
    for i in (1, 2):
        if node.has_output(i):
            node.check_output(i, stat_shape)
    scale_shape = node.input(1)
    s_strides = broadcast_strides(node, scale_shape, norm_shape)
    params = [Param("x", shape), Param("scale", scale_shape)]
    inputs = ["x", "scale"]
    b_strides = None
    if node.has_input(2):
        bias_shape = node.input(2)
        b_strides = broadcast_strides(node, bias_shape, norm_shape)
        params.append(Param("bias", bias_shape))
        inputs.append("bias")

    def value(x_j: str, j: str) -> str:
        """Element ``j`` of the output, ``x_j`` its input."""
        s_index = index_expr(j, norm_shape, s_strides)
        v = f"((x[{x_j}] - pivot) - shift) * inv_std * scale[{s_index}]"
        if b_strides is not None:
            v += f" + bias[{index_expr(j, norm_shape, b_strides)}]"
        return v

    outputs = ["y"]
    params.append(Param("y", shape, const=False))
    stat_params = []
    for i, pname in ((1, "mean_out"), (2, "inv_std_out")):
        if node.has_output(i):
            params.append(Param(pname, stat_shape, const=False))
            outputs.append(pname)
            stat_params.append(pname)
        else:
            outputs.append("")
    while outputs and not outputs[-1]:
        outputs.pop()
    stat_value = {"mean_out": "mean", "inv_std_out": "inv_std"}
    comment = f"LayerNormalization {shape_str(shape)} axis={axis} epsilon={eps}"
    partials = _row_partials(node, length)
    if partials:
        grid = Grid.of(shape[:axis] or (1,))
        at = _row_element(grid.at(strides_of(shape)[:axis] or (0,)), 1)
        body = "\n".join([
            # the same shifted two-pass as the work-group form below
            f"const float pivot = x[{at('0')}];",
            _row_pass("p", "0.0f", lambda p, j: f"{p} += x[{at(j)}] - pivot;", "{a} + {b}",
                      length, partials),
            "const float shift = p0 / ROWLEN;",
            "const float mean = pivot + shift;",
            _row_pass("q", "0.0f",  # d3 for the partial q3: each element loaded once
                      lambda p, j: f"const float d{p[1:]} = (x[{at(j)}] - pivot) - shift; "
                                   f"{p} += d{p[1:]} * d{p[1:]};",
                      "{a} + {b}", length, partials),
            f"const float inv_std = rsqrt(q0 / ROWLEN + {flt(eps)});",
            *(f"{p}[{grid.flat()}] = {stat_value[p]};" for p in stat_params),
            "for (long j = 0; j < ROWLEN; j++) {",
            f"    y[{at('j')}] = {value(at('j'), 'j')};",
            "}",
        ])
        return _row_kernel(node, grid, length, params, body, inputs, outputs, comment)
    elem = "row * ROWLEN + j" if rows > 1 else "j"
    first = "row * ROWLEN" if rows > 1 else "0"
    stats = [f"    {p}[row] = {stat_value[p]};" for p in stat_params]
    lanes = lanes_for(node, length)
    body = "\n".join(
        [
            # shifted two-pass: sums of x - x[first] stay small where x is large but its
            # spread is not (1e4 +- 1), so the mean and the variance keep their precision.
            # Lane 0 reads the pivot (its own first element) and shares it: every lane
            # still reads only its own elements, so dependence widths do not change.
            "if (lane == 0) {",
            f"    red[0] = x[{first}];",
            "}",
            "barrier(CLK_LOCAL_MEM_FENCE);",
            "const float pivot = red[0];",
            "barrier(CLK_LOCAL_MEM_FENCE);",
            _row_loop("0.0f", f"part += x[{elem}] - pivot;"),
            _tree(lanes, "{a} + {b}"),
            "const float shift = red[0] / ROWLEN;",
            "const float mean = pivot + shift;",
            "barrier(CLK_LOCAL_MEM_FENCE);",
            _row_loop(
                "0.0f", f"const float d = (x[{elem}] - pivot) - shift;\n        part += d * d;",
                False,
            ),
            _tree(lanes, "{a} + {b}"),
            f"const float inv_std = rsqrt(red[0] / ROWLEN + {flt(eps)});",
            *(["if (lane == 0) {", *stats, "}"] if stats else []),
            "for (int k = 0; k < CHUNKS; k++) {",
            "    const int j = k * LANES + lane;",
            "    if (j < ROWLEN) {",
            f"        y[{elem}] = {value(elem, 'j')};",
            "    }",
            "}",
        ]
    )
    return _reduction_kernel(node, rows, length, {}, params, body, inputs, outputs, comment)


#: Reductions: (initial value, combine of ``{a}`` and ``{b}``, finish of ``total``).
#: Max/Min keep NaN as onnxruntime does (``fmax``/``fmin`` would drop it).
REDUCTIONS: dict[str, tuple[str, str, str]] = {
    "ReduceSum": ("0.0f", "{a} + {b}", "{total}"),
    "ReduceMean": ("0.0f", "{a} + {b}", "{total} / ROWLEN"),
    "ReduceMax": ("-INFINITY", "({a} > {b} || {a} != {a}) ? {a} : {b}", "{total}"),
    "ReduceMin": ("INFINITY", "({a} < {b} || {a} != {a}) ? {a} : {b}", "{total}"),
}

#: Global pooling: the reduction over every axis after the channel axis, dimensions kept.
GLOBAL_POOLS = {"GlobalAveragePool": "ReduceMean", "GlobalMaxPool": "ReduceMax"}


def reduce(node: Node) -> OpKernel:
    """ReduceSum/Mean/Max/Min over any ``axes`` (attribute, or the axes input passed as
    attribute), with ``keepdims`` and ``noop_with_empty_axes``; GlobalAveragePool and
    GlobalMaxPool as the reduction over the spatial axes."""
    kind = GLOBAL_POOLS.get(node.op_type, node.op_type)
    shape = node.input(0)
    rank = len(shape)
    if node.op_type in GLOBAL_POOLS:
        node.check_attrs([])
        if rank < 3:
            raise node.invalid(f"input must have rank >= 3 (N, C, spatial...), got {shape}")
        axes, keepdims, noop = list(range(2, rank)), 1, 0
    else:
        node.check_attrs(["axes", "keepdims", "noop_with_empty_axes"])
        axes = node.ints_attr("axes") or []
        keepdims = node.int_attr("keepdims", 1)
        noop = node.int_attr("noop_with_empty_axes", 0)
    if not axes:
        if noop:
            node.check_output(0, shape)
            return copy_kernel(node, shape)
        axes = list(range(rank))
    red = sorted({node.axis(a, rank, "axes") for a in axes})
    if len(red) != len(axes):
        raise node.invalid(f"attribute 'axes' {axes} repeats an axis")
    kept = [d for d in range(rank) if d not in red]
    out = tuple(1 if d in red else shape[d] for d in range(rank)) if keepdims else tuple(
        shape[d] for d in kept
    )
    node.check_output(0, out)
    st = strides_of(shape)
    kept_shape, red_shape = [shape[d] for d in kept], [shape[d] for d in red]
    rows, length = prod(kept_shape), prod(red_shape)
    base = index_expr("row", kept_shape, [st[d] for d in kept])
    offset = index_expr("j", red_shape, [st[d] for d in red])
    elem = offset if base == "0" else f"{base} + {offset}"
    init, combine, finish = REDUCTIONS[kind]
    if red == list(range(len(red))) and kept and length <= node.variant.reduction_loop_max:
        return _leading_reduction(node, shape, out, rows, length, kind)
    params = [Param("x", shape), Param("y", out, const=False)]
    comment = f"{node.op_type} {shape_str(shape)} axes={red} keepdims={keepdims}"
    partials = _row_partials(node, length)
    if partials and red == list(range(rank - len(red), rank)):  # contiguous rows
        grid = Grid.of(tuple(kept_shape) or (1,))
        at = _row_element(grid.at([st[d] for d in kept] or (0,)), 1)
        total = _row_pass("p", init, lambda p, j: f"const float v{p[1:]} = x[{at(j)}]; "
                          f"{p} = {combine.format(a=p, b=f'v{p[1:]}')};", combine, length,
                          partials)
        body = f"{total}\ny[{grid.flat()}] = {finish.format(total='p0')};"
        return _row_kernel(node, grid, length, params, body, ["x"], ["y"], comment)
    if combine == "{a} + {b}":
        update = f"part += x[{elem}];"
    else:  # the element loaded once, as the brute-force counts see it
        update = f"const float v = x[{elem}];\n        part = {combine.format(a='part', b='v')};"
    body = "\n".join(
        [
            _row_loop(init, update),
            _tree(lanes_for(node, length), combine),
            "if (lane == 0) {",
            f"    y[row] = {finish.format(total='red[0]')};",
            "}",
        ]
    )
    return _reduction_kernel(node, rows, length, {}, params, body, ["x"], ["y"], comment)
