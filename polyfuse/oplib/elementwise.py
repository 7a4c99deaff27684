"""Element-wise operators: one work-item per output element on a :class:`Grid` NDRange.

Broadcast inputs are read at ``grid.at(broadcast_strides)``: a sum of the work-item's
coordinates times constant strides, affine in the global ids (no division by row lengths).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from polyfuse.oplib import fastmath
from polyfuse.oplib._common import (
    Grid,
    Node,
    OpKernel,
    Param,
    broadcast_shape,
    broadcast_strides,
    flt,
    grid_kernel,
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
    "Log": "log(v)",
    "Reciprocal": "1.0f / v",
    # log1p(exp(v)) overflows to inf where it is v to float32 precision
    "Softplus": "(v > 20.0f ? v : log1p(exp(v)))",
    "HardSwish": "v * " + "(v < -3.0f ? 0.0f : v > 3.0f ? 1.0f : v / 6.0f + 0.5f)",
}


def _clip(lo: str, hi: str) -> str:
    """``v`` limited to [lo, hi] by comparisons, so NaN stays NaN (fmin/fmax would drop it)."""
    return f"(v < {lo} ? {lo} : v > {hi} ? {hi} : v)"


def _clip_bound(node: Node, key: str, default: float) -> float:
    """Clip's ``min``/``max``: an attribute (opset 6) or the constant input given as one."""
    value = node.attr(key, default)
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise node.invalid(f"input '{key}' must be a scalar, got {len(value)} values")
        value = value[0]
    return float(value)


#: Unary operators with attributes: the attributes they take and the expression of ``v``.
UNARY_ATTRS: dict[str, tuple[tuple[str, ...], Callable[[Node], str]]] = {
    "LeakyRelu": (("alpha",), lambda n: f"v < 0.0f ? {flt(float(n.attr('alpha', 0.01)))} * v : v"),
    "HardSigmoid": (("alpha", "beta"), lambda n: _clip("0.0f", "1.0f").replace(
        "v", f"({flt(float(n.attr('alpha', 0.2)))} * v + {flt(float(n.attr('beta', 0.5)))})")),
    "Elu": (("alpha",), lambda n: f"v < 0.0f ? {flt(float(n.attr('alpha', 1.0)))} * "
            "(exp(v) - 1.0f) : v"),
    "Clip": (("min", "max"), lambda n: _clip(flt(_clip_bound(n, "min", -np.inf)),
                                            flt(_clip_bound(n, "max", np.inf)))),
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


def unary_expr(node: Node) -> str:
    """The C expression of a unary node (:data:`UNARY`, :data:`UNARY_ATTRS` or Gelu) in ``v``,
    its attributes checked."""
    if node.op_type == "Gelu":
        node.check_attrs(["approximate"])
        approx = str(node.attr("approximate", "none"))
        if approx not in _GELU:
            raise node.unsupported(f"attribute 'approximate'={approx!r} is not supported")
        return _GELU[approx]
    if node.op_type in UNARY_ATTRS:
        allowed, expr = UNARY_ATTRS[node.op_type]
        node.check_attrs(allowed)
        return expr(node)
    node.check_attrs([])
    return UNARY[node.op_type]


def unary(node: Node) -> OpKernel:
    """The operators of :data:`UNARY` and :data:`UNARY_ATTRS`, and Gelu."""
    expr = unary_expr(node)
    shape = node.input(0)
    node.check_output(0, shape)
    grid = Grid.of(shape)
    stmts = f"const float v = x[{grid.flat()}];\ny[{grid.flat()}] = {expr};"
    params = [Param("x", shape), Param("y", shape, const=False)]
    return grid_kernel(
        node, grid, params, {}, stmts, ["x"], ["y"], f"{node.op_type} {shape_str(shape)}"
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
    grid = Grid.of(out)
    loads = [
        f"const float v{i} = {n}[{grid.at(broadcast_strides(node, s, out))}];"
        for i, (n, s) in enumerate(zip(names, shapes))
    ]
    if node.op_type in BINARY:
        stmts = "\n".join(loads) + f"\ny[{grid.flat()}] = {BINARY[node.op_type]('v0', 'v1')};"
    else:
        fold = VARIADIC[node.op_type]
        acc = "v0"
        for i in range(1, n_in):
            loads.append(f"const float r{i} = {fold(acc, f'v{i}')};")
            acc = f"r{i}"
        stmts = "\n".join(loads) + f"\ny[{grid.flat()}] = {acc};"
    params = [Param(n, s) for n, s in zip(names, shapes)] + [Param("y", out, const=False)]
    comment = f"{node.op_type} {' , '.join(shape_str(s) for s in shapes)} -> {shape_str(out)}"
    return grid_kernel(node, grid, params, {}, stmts, names, ["y"], comment)


def where(node: Node) -> OpKernel:
    """Where(cond, x, y) with broadcasting; ``cond`` is a bool (one byte) buffer.

    Both branches are read unconditionally so that the accesses do not depend on data.
    """
    node.check_attrs([])
    shapes = [node.input(i) for i in range(3)]
    out = broadcast_shape(node, shapes)
    node.check_output(0, out)
    grid = Grid.of(out)
    idx = [grid.at(broadcast_strides(node, s, out)) for s in shapes]
    stmts = (
        f"const float xv = x[{idx[1]}];\n"
        f"const float yv = y[{idx[2]}];\n"
        f"out[{grid.flat()}] = cond[{idx[0]}] ? xv : yv;"
    )
    params = [
        Param("cond", shapes[0], ctype="uchar"),
        Param("x", shapes[1]),
        Param("y", shapes[2]),
        Param("out", out, const=False),
    ]
    comment = f"Where -> {shape_str(out)}"
    return grid_kernel(
        node, grid, params, {}, stmts, ["cond", "x", "y"], ["out"], comment, {"cond": "bool"}
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
    grid = Grid.of(shape)
    at = grid.flat()
    stmts = (
        f"const int c = {grid.coord(1)};\n"
        f"y[{at}] = (x[{at}] - mean[c]) * rsqrt(var[c] + {flt(eps)}) * scale[c] + bias[c];"
    )
    names = ["x", "scale", "bias", "mean", "var"]
    params = [Param("x", shape)] + [Param(n, (channels,)) for n in names[1:]]
    params.append(Param("y", shape, const=False))
    comment = f"BatchNormalization {shape_str(shape)} epsilon={eps}"
    return grid_kernel(node, grid, params, {}, stmts, names, ["y"], comment)
