"""Element-wise operators: one work-item per output element on a 1-D NDRange.

Broadcast inputs are read at ``index_expr(gid, out_shape, broadcast_strides)``: coordinates are
``gid / inner % size`` by constants, so the reads are quasi-affine in the global id.
"""

from __future__ import annotations

from collections.abc import Callable

from polyfuse.oplib import fastmath
from polyfuse.oplib._common import (
    Node,
    OpKernel,
    Param,
    broadcast_shape,
    broadcast_strides,
    elementwise_kernel,
    flt,
    index_expr,
    prod,
    shape_str,
)

#: Unary operators as C expressions of the input value ``v``.
UNARY: dict[str, str] = {
    "Sqrt": "sqrt(v)",
    "Exp": "exp(v)",
    "Erf": fastmath.erf("v"),  # rational forms: PoCL's erf/tanh do not vectorize
    "Tanh": fastmath.tanh("v"),
    "Sigmoid": "1.0f / (1.0f + exp(-v))",
    "Relu": "v < 0.0f ? 0.0f : v",  # NaN stays NaN (fmax would drop it), as in onnxruntime
    "Neg": "-v",
    "Abs": "fabs(v)",
}

_GELU = {
    "none": f"0.5f * v * (1.0f + {fastmath.erf('(v * M_SQRT1_2_F)')})",
    "tanh": "0.5f * v * (1.0f + "
            f"{fastmath.tanh('(0.7978845608028654f * (v + 0.044715f * v * v * v))')})",
}

#: Binary operators as C expressions of ``a`` and ``b``.
BINARY: dict[str, Callable[[str, str], str]] = {
    "Add": lambda a, b: f"{a} + {b}",
    "Sub": lambda a, b: f"{a} - {b}",
    "Mul": lambda a, b: f"{a} * {b}",
    "Div": lambda a, b: f"{a} / {b}",
    "Pow": lambda a, b: f"pow({a}, {b})",
}

#: Variadic operators (folded left to right through named temporaries).  NaN propagates as in
#: onnxruntime (``x != x`` is the NaN test); ``fmax``/``fmin`` would return the other operand.
VARIADIC: dict[str, Callable[[str, str], str]] = {
    "Max": lambda a, b: f"({a} > {b} || {a} != {a}) ? {a} : {b}",
    "Min": lambda a, b: f"({a} < {b} || {a} != {a}) ? {a} : {b}",
}


def unary(node: Node) -> OpKernel:
    """Sqrt, Exp, Erf, Tanh, Sigmoid, Relu, Neg, Abs and Gelu."""
    if node.op_type == "Gelu":
        node.check_attrs(["approximate"])
        approx = str(node.attr("approximate", "none"))
        if approx not in _GELU:
            raise node.unsupported(f"attribute 'approximate'={approx!r} is not supported")
        expr = _GELU[approx]
    else:
        node.check_attrs([])
        expr = UNARY[node.op_type]
    shape = node.input(0)
    node.check_output(0, shape)
    stmts = f"const float v = x[gid];\ny[gid] = {expr};"
    params = [Param("x", shape), Param("y", shape, const=False)]
    return elementwise_kernel(
        node, prod(shape), params, {}, stmts, ["x"], ["y"], f"{node.op_type} {shape_str(shape)}"
    )


def binary(node: Node) -> OpKernel:
    """Add, Sub, Mul, Div, Pow, and variadic Max/Min, with numpy broadcasting."""
    node.check_attrs([])
    n_in = len(node.input_shapes)
    if node.op_type in BINARY and n_in != 2:
        raise node.invalid(f"expects 2 inputs, got {n_in}")
    if n_in < 1:
        raise node.invalid("expects at least one input")
    shapes = [node.input(i) for i in range(n_in)]
    out = broadcast_shape(node, shapes)
    node.check_output(0, out)
    names = ["a", "b"] if n_in == 2 else [f"x{i}" for i in range(n_in)]
    loads = [
        f"const float v{i} = {n}[{index_expr('gid', out, broadcast_strides(node, s, out))}];"
        for i, (n, s) in enumerate(zip(names, shapes))
    ]
    if node.op_type in BINARY:
        stmts = "\n".join(loads) + f"\ny[gid] = {BINARY[node.op_type]('v0', 'v1')};"
    else:
        fold = VARIADIC[node.op_type]
        acc = "v0"
        for i in range(1, n_in):
            loads.append(f"const float r{i} = {fold(acc, f'v{i}')};")
            acc = f"r{i}"
        stmts = "\n".join(loads) + f"\ny[gid] = {acc};"
    params = [Param(n, s) for n, s in zip(names, shapes)] + [Param("y", out, const=False)]
    comment = f"{node.op_type} {' , '.join(shape_str(s) for s in shapes)} -> {shape_str(out)}"
    return elementwise_kernel(node, prod(out), params, {}, stmts, names, ["y"], comment)


def where(node: Node) -> OpKernel:
    """Where(cond, x, y) with broadcasting; ``cond`` is a bool (one byte) buffer.

    Both branches are read unconditionally so that the accesses do not depend on data.
    """
    node.check_attrs([])
    shapes = [node.input(i) for i in range(3)]
    out = broadcast_shape(node, shapes)
    node.check_output(0, out)
    idx = [index_expr("gid", out, broadcast_strides(node, s, out)) for s in shapes]
    stmts = (
        f"const float xv = x[{idx[1]}];\n"
        f"const float yv = y[{idx[2]}];\n"
        f"out[gid] = cond[{idx[0]}] ? xv : yv;"
    )
    params = [
        Param("cond", shapes[0], ctype="uchar"),
        Param("x", shapes[1]),
        Param("y", shapes[2]),
        Param("out", out, const=False),
    ]
    comment = f"Where -> {shape_str(out)}"
    return elementwise_kernel(
        node, prod(out), params, {}, stmts, ["cond", "x", "y"], ["out"], comment,
        {"cond": "bool"},
    )


def batch_norm(node: Node) -> OpKernel:
    """BatchNormalization in inference mode (``training_mode`` 0): per channel (axis 1)
    ``(x - mean) * rsqrt(var + epsilon) * scale + bias`` with the running statistics.

    ``momentum`` only matters in training; the running-statistics outputs of training mode are
    refused rather than left unwritten.
    """
    node.check_attrs(["epsilon", "momentum", "training_mode", "spatial"])
    if node.int_attr("training_mode", 0) != 0:
        raise node.unsupported("attribute 'training_mode'=1 is not supported (inference only)")
    if node.int_attr("spatial", 1) != 1:
        raise node.unsupported("attribute 'spatial'=0 is not supported")
    if any(node.has_output(i) for i in range(1, len(node.output_shapes))):
        raise node.unsupported("outputs running_mean/running_var (training mode) are not "
                               "supported")
    shape = node.input(0)
    if len(shape) < 2:
        raise node.invalid(f"input X must have rank >= 2, got {shape}")
    channels = shape[1]
    for i, what in enumerate(("scale", "B", "input_mean", "input_var"), 1):
        if node.input(i) != (channels,):
            raise node.invalid(f"input {i} ({what}) has shape {node.input(i)}, expected "
                               f"({channels},)")
    node.check_output(0, shape)
    eps = float(node.attr("epsilon", 1e-5))
    c = index_expr("gid", shape, (0, 1) + (0,) * (len(shape) - 2))
    stmts = (
        f"const int c = {c};\n"
        f"y[gid] = (x[gid] - mean[c]) * rsqrt(var[c] + {flt(eps)}) * scale[c] + bias[c];"
    )
    names = ["x", "scale", "bias", "mean", "var"]
    params = [Param("x", shape)] + [Param(n, (channels,)) for n in names[1:]]
    params.append(Param("y", shape, const=False))
    comment = f"BatchNormalization {shape_str(shape)} epsilon={eps}"
    return elementwise_kernel(node, prod(shape), params, {}, stmts, names, ["y"], comment)
