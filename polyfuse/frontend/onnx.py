"""The ONNX front-end: a model graph becomes a :class:`~polyfuse.core.program.Program`.

Why it looks the way it does:

* **One launch per node, real kernels.**  Each node that computes on the device becomes one launch
  of the :mod:`polyfuse.oplib` kernel specialized to its static shapes, so the polyhedral
  analysis sees exactly what a hand-written OpenCL program would show it (tiled GEMMs with
  ``__local`` tiles and barriers, work-group reductions, element-wise kernels) and fusion works
  on the same terms as for C host programs.
* **Shapes are static.**  polyfuse's analysis is exact only with every size known, so dynamic
  dimensions must be given (``params`` by ``dim_param`` name) and shape sub-graphs (``Shape``,
  ``Gather``, ``Concat``, ... on constants) are folded on the host with numpy instead of being
  launched: PyTorch exports are full of them and they compute sizes, not data.
* **Re-views are aliases, not copies.**  ``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze``,
  ``Identity`` and a ``Cast`` to the same type do not move data in a contiguous row-major layout,
  so their output tensor names the input's buffer.  A copy kernel would put a launch (and a
  dependence the planner must reason about) where the original computation has none; with
  aliases, BERT's ``MatMul → Add → Reshape → Transpose`` is three launches on one buffer chain.
* **Weights travel with the program.**  Initializers that a kernel reads become buffers whose
  contents are in :attr:`Program.data`, which every run uses as its initial contents, so
  verification and ``polyfuse run`` compute with the model's real weights; graph inputs are
  buffers written by a host ``write`` op and graph outputs are read back by a blocking ``read``.
* **float16 where the device has it.**  A float16 tensor lives in a ``half`` buffer when the
  target reports ``cl_khr_fp16`` (the kernels load it as float and round when storing), and is
  an error naming the tensor where it does not; a Cast between float32 and float16 is a copy
  kernel, between equal types an alias.  ``docs/operators.md`` is generated from the registries
  here and in :mod:`polyfuse.oplib` (:mod:`polyfuse.frontend.onnx_ops`).
* **Errors name the place.**  Every refusal is a :class:`~polyfuse.core.program.PolyfuseError` whose
  ``file`` is the model path and whose one-line message names the node, operator, input or
  attribute (oplib's :class:`~polyfuse.core.program.UnsupportedError` is re-raised with the
  node name).
"""

from __future__ import annotations

import keyword
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from polyfuse.core.program import (
    REFERENCE_TARGET,
    KernelVariant,
    PolyfuseError,
    Program,
    Target,
    UnsupportedError,
)
from polyfuse.frontend.onnx_nodes import Fate, NodeOutcome

#: ONNX default-domain opsets this front-end reads (the oplib implements their semantics).
#: Opsets 21-23 only widen type constraints (int4/uint4, bfloat16 Conv, float4 Cast) of the
#: operators read here, so their float32 semantics are those of opset 20; PyTorch's dynamo
#: exporter writes opset 20 by default and 21-23 on request.
MIN_OPSET, MAX_OPSET = 13, 23

#: Operators that only re-view contiguous memory: their output aliases the input buffer.
ALIAS_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Cast",
                       "CastLike"})

#: Inputs that the oplib takes as static attributes (by ONNX input position), not as buffers.
STATIC_INPUTS: dict[str, dict[int, str]] = {
    "Reshape": {1: "shape"},
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"},
    "ReduceMean": {1: "axes"},
    "ReduceSum": {1: "axes"},
    "ReduceMax": {1: "axes"},
    "ReduceMin": {1: "axes"},
    "Clip": {1: "min", 2: "max"},
    "Pad": {1: "pads", 2: "constant_value", 3: "axes"},
    "Resize": {1: "roi", 2: "scales", 3: "sizes"},
    "Squeeze": {1: "axes"},
    "Unsqueeze": {1: "axes"},
    "Split": {1: "split"},
    "Expand": {1: "shape"},
}

#: Kernel-buffer element types by the dtype names oplib's ``input_dtypes`` uses.
_BUFFER_TYPES = {"float32": "float", "int32": "int", "bool": "uchar"}
_NP_OF_BUFFER = {"float": np.dtype(np.float32), "int": np.dtype(np.int32),
                 "uchar": np.dtype(np.bool_), "half": np.dtype(np.float16)}

_C_RESERVED = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "half", "kernel", "global",
    "local", "constant", "private", "uchar", "uint", "ulong", "ushort", "host",
}
#: Name prefixes the code generator reserves for its own identifiers.
_RESERVED_PREFIX = re.compile(r"^(pf_|f\d+_|F_[hgl]\d|_)")


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: its ONNX name, the buffer that holds it, shape and dtype."""

    name: str
    buffer: str
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class GraphIO:
    """A model's graph inputs and outputs without its program: what a caller of the model needs
    (a session set up from the disk cache has no program)."""

    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    #: as :attr:`OnnxModel.index_bounds`
    index_bounds: Mapping[str, tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class OnnxModel:
    """What :func:`load_onnx_model` produced: the program and how graph I/O maps to buffers."""

    path: str
    program: Program
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    #: node name -> what happened to it ("launch <kernel>", "alias of <buffer>", "folded"):
    #: :attr:`outcomes` in words
    nodes: Mapping[str, str] = field(default_factory=dict)
    #: node name -> what happened to it, as a record
    outcomes: Mapping[str, NodeOutcome] = field(default_factory=dict)
    #: number of nodes in the graph
    op_count: int = 0
    #: graph input -> (axis size, node) of the Gather that reads it as indices: values outside
    #: ``[-size, size-1]`` are rejected when the model runs, as onnxruntime does
    index_bounds: Mapping[str, tuple[int, str]] = field(default_factory=dict)

    @property
    def io(self) -> GraphIO:
        """The graph inputs and outputs alone."""
        return GraphIO(self.inputs, self.outputs, self.index_bounds)


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError:  # pragma: no cover - onnx is a dependency
        raise PolyfuseError("the ONNX front-end needs the 'onnx' package "
                            "(pip install 'onnx>=1.14')") from None
    return onnx


def _first_line(err: BaseException, limit: int = 400) -> str:
    """The message of ``err`` on one line (lines joined: the checker puts node names on the
    second line), cut at ``limit`` characters."""
    text = " ".join(ln.strip() for ln in str(err).splitlines() if ln.strip())
    if not text:
        return type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _identifier(text: str, fallback: str) -> str:
    """A C identifier derived from an ONNX name (kept readable, never reserved)."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")
    name = re.sub(r"__+", "_", name) or fallback
    if name[0].isdigit() or name in _C_RESERVED or keyword.iskeyword(name) or \
            _RESERVED_PREFIX.match(name):
        name = f"t_{name}"
    return name


# ----------------------------------------------------------------------------------------------
# Reading and checking the file
# ----------------------------------------------------------------------------------------------


def _read_model(path: str) -> Any:
    """Load, check external data, opset and structure; return the ``ModelProto``."""
    onnx = _import_onnx()
    from google.protobuf.message import DecodeError

    if not os.path.isfile(path):
        raise PolyfuseError("no such ONNX file", path)
    try:
        model = onnx.load(path, load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, OSError) as err:
        raise PolyfuseError(f"malformed ONNX file: {_first_line(err)}", path) from None
    if not model.HasField("graph"):
        raise PolyfuseError("malformed ONNX file: no graph in the model", path)
    base = os.path.dirname(os.path.abspath(path))
    from onnx.external_data_helper import uses_external_data

    for tensor in _all_tensors(model):
        if uses_external_data(tensor):
            info = {e.key: e.value for e in tensor.external_data}
            loc = info.get("location", "")
            full = os.path.normpath(os.path.join(base, loc))
            if not loc or not os.path.isfile(full):
                raise PolyfuseError(f"initializer '{tensor.name}': external data file "
                                    f"'{loc}' not found (looked in {base})", path)
    try:
        onnx.load_external_data_for_model(model, base)
    except (OSError, ValueError, RuntimeError) as err:
        raise PolyfuseError(f"cannot read external data: {_first_line(err)}", path) from None
    opset = None
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = int(imp.version)
    if opset is None:
        raise PolyfuseError("malformed ONNX file: no default-domain opset import", path)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UnsupportedError(f"opset {opset} is not supported (polyfuse reads opsets "
                               f"{MIN_OPSET}-{MAX_OPSET}; convert with "
                               "onnx.version_converter)", path)
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError) as err:
        raise PolyfuseError(f"invalid ONNX model: {_first_line(err)}", path) from None
    return model


def _all_tensors(model: Any) -> list[Any]:
    out = list(model.graph.initializer)
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                out.append(attr.t)
    return out


def _fix_inputs(model: Any, params: Mapping[str, int], path: str) -> None:
    """Replace dynamic input dimensions by the values in ``params``, or fail naming them; a
    name in ``params`` that is no symbolic dimension of the model is an error too (a typo or
    the wrong model would otherwise pass silently)."""
    inits = {t.name for t in model.graph.initializer}
    names = sorted({dim.dim_param for vi in model.graph.input if vi.name not in inits
                    and vi.type.HasField("tensor_type")
                    for dim in vi.type.tensor_type.shape.dim if dim.HasField("dim_param")
                    and dim.dim_param})
    unknown = [n for n in params if n not in names]
    if unknown:
        known = ", ".join(names) if names else "none: its input shapes are static"
        raise PolyfuseError(f"--param {unknown[0]}: the model has no symbolic dimension named "
                            f"'{unknown[0]}' (its symbolic dimensions: {known})", path)
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise UnsupportedError(f"input '{vi.name}' is not a tensor", path)
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            raise PolyfuseError(f"input '{vi.name}' has no shape: polyfuse needs static shapes",
                                path)
        for d, dim in enumerate(tt.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                continue
            if dim.HasField("dim_param") and dim.dim_param in params:
                value = int(params[dim.dim_param])
                if value < 1:
                    raise PolyfuseError(f"params['{dim.dim_param}'] = {value} must be >= 1", path)
                dim.ClearField("dim_param")
                dim.dim_value = value
                continue
            if dim.HasField("dim_param") and dim.dim_param:
                raise PolyfuseError(
                    f"input '{vi.name}' dimension {d} ('{dim.dim_param}') is dynamic: give its "
                    f"value with params={{'{dim.dim_param}': N}} (--param "
                    f"{dim.dim_param}=N)", path)
            raise PolyfuseError(f"input '{vi.name}' dimension {d} is unknown: polyfuse needs "
                                "static shapes (export with fixed sizes)", path)


#: initializers with more elements than this are shape-inferred from their dims alone
_INFER_FROM_DIMS = 64
#: ``TensorProto`` data types of floating-point tensors (FLOAT, FLOAT16, DOUBLE, BFLOAT16)
_FLOAT_TYPES = frozenset({1, 10, 11, 16})


def _infer_shapes(model: Any, path: str) -> Any:
    """ONNX shape inference, strict unless the graph uses operators of other domains.

    onnx's inference serializes the whole model, weights included (twice per call: 1.8 s for
    a 340 MB BERT-base encoder); the bytes of large floating-point initializers are set aside
    meanwhile, since inference reads only their dims (small integer ones, such as Reshape's
    shapes, keep their values for data propagation)."""
    onnx = _import_onnx()
    other_domains = any(n.domain not in ("", "ai.onnx") for n in model.graph.node)
    set_aside: dict[int, bytes] = {}
    for i, t in enumerate(model.graph.initializer):
        if t.raw_data and t.data_type in _FLOAT_TYPES and np.prod(t.dims) > _INFER_FROM_DIMS:
            set_aside[i] = t.raw_data
            t.raw_data = b""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True,
                                                     strict_mode=not other_domains,
                                                     data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError,
            RuntimeError) as err:
        raise PolyfuseError(f"shape inference failed: {_first_line(err)}", path) from None
    finally:
        for i, raw in set_aside.items():
            model.graph.initializer[i].raw_data = raw
    for i, raw in set_aside.items():
        inferred.graph.initializer[i].raw_data = raw
    return inferred


# ----------------------------------------------------------------------------------------------
# Host evaluation of constant sub-graphs
# ----------------------------------------------------------------------------------------------


def _np_dtype(onnx_type: int) -> Optional[np.dtype]:
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
    except (KeyError, TypeError, ValueError):
        return None


def _attrs(node: Any, where: str, path: str) -> dict[str, Any]:
    """Node attributes as Python values (tensors as numpy arrays); graphs are refused."""
    from onnx import AttributeProto, helper, numpy_helper

    out: dict[str, Any] = {}
    for attr in node.attribute:
        if attr.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
            raise UnsupportedError(f"{where}: attribute '{attr.name}' is a sub-graph "
                                   "(control flow is not supported)", path)
        if attr.type == AttributeProto.TENSOR:
            out[attr.name] = numpy_helper.to_array(attr.t)
            continue
        if attr.ref_attr_name:
            raise UnsupportedError(f"{where}: attribute '{attr.name}' refers to a function "
                                   "attribute", path)
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        out[attr.name] = value
    return out


def _axes(values: Any, rank: int) -> list[int]:
    return sorted(int(a) + rank if int(a) < 0 else int(a) for a in np.ravel(values))


def _reshape_target(shape: Sequence[int], target: Sequence[int], allowzero: int) -> tuple:
    """ONNX Reshape's output shape (0 copies the input dimension unless allowzero, -1 infers)."""
    out = [int(shape[i]) if (int(t) == 0 and not allowzero) else int(t)
           for i, t in enumerate(target)]
    if out.count(-1) == 1:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(np.prod(shape)) // max(known, 1)
    return tuple(out)


def _slice(x: np.ndarray, starts: Any, ends: Any, axes: Any, steps: Any) -> np.ndarray:
    """numpy slicing with ONNX's clamping (an end before the start of a reversed axis is None)."""
    starts, ends = np.ravel(starts), np.ravel(ends)
    axes = np.ravel(axes) if axes is not None else np.arange(len(starts))
    steps = np.ravel(steps) if steps is not None else np.ones(len(starts), np.int64)
    index = [slice(None)] * x.ndim
    for s, e, a, k in zip(starts, ends, axes, steps):
        a = int(a) + x.ndim if int(a) < 0 else int(a)
        end: Optional[int] = int(e)
        if int(k) < 0 and int(e) < -x.shape[a]:
            end = None
        index[a] = slice(int(s), end, int(k))
    return x[tuple(index)]


def _flatten(x: np.ndarray, axis: int) -> np.ndarray:
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        return np.trunc(np.true_divide(a, b)).astype(a.dtype)
    return np.divide(a, b).astype(a.dtype)


FoldFn = Callable[[list[Optional[np.ndarray]], dict[str, Any], list[tuple]], list[np.ndarray]]


def _fold_constant(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
    if "value" in at:
        return [np.asarray(at["value"])]
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32),
                    ("value_int", np.int64), ("value_ints", np.int64)):
        if key in at:
            return [np.asarray(at[key], dtype=dt)]
    raise KeyError(f"attribute '{sorted(at)[0]}'" if at else "attribute 'value'")


def _fold_shape(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
    shape = np.asarray(shapes[0], dtype=np.int64)
    rank = len(shape)
    start = int(at.get("start", 0))
    end = at.get("end")
    start = start + rank if start < 0 else start
    stop = rank if end is None else (int(end) + rank if int(end) < 0 else int(end))
    return [shape[max(0, min(start, rank)):max(0, min(stop, rank))]]


def _fold_cast(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
    dt = _np_dtype(int(at["to"]))
    if dt is None:
        raise KeyError("attribute 'to'")
    return [ins[0].astype(dt)]


def _fold_constant_of_shape(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
    value = np.asarray(at.get("value", np.zeros(1, np.float32)))
    return [np.full(tuple(int(d) for d in ins[0]), value.ravel()[0], dtype=value.dtype)]


def _fold_squeeze(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
    axes = ins[1] if len(ins) > 1 and ins[1] is not None else at.get("axes")
    if axes is None:
        return [np.squeeze(ins[0])]
    return [np.squeeze(ins[0], axis=tuple(_axes(axes, ins[0].ndim)))]


def _fold_unsqueeze(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
    axes = ins[1] if len(ins) > 1 and ins[1] is not None else at.get("axes")
    rank = ins[0].ndim + len(np.ravel(axes))
    out = ins[0]
    for a in _axes(axes, rank):
        out = np.expand_dims(out, a)
    return [out]


def _fold_split(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
    x = ins[0]
    axis = int(at.get("axis", 0))
    split = ins[1] if len(ins) > 1 and ins[1] is not None else at.get("split")
    if split is None:
        n = int(at.get("num_outputs", len(shapes) - 1))
        return list(np.array_split(x, n, axis=axis))
    return list(np.split(x, np.cumsum(np.ravel(split))[:-1], axis=axis))


def _fold_trilu(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
    k = int(np.ravel(ins[1])[0]) if len(ins) > 1 and ins[1] is not None else 0
    fn = np.triu if int(at.get("upper", 1)) else np.tril
    return [fn(ins[0], k)]


def _fold_reduce(fn: Callable) -> FoldFn:
    """A Reduce* folder: axes from the input (opset 18) or the attribute, keepdims, noop."""
    def fold(ins: list, at: dict, shapes: list) -> list[np.ndarray]:
        axes = ins[1] if len(ins) > 1 and ins[1] is not None else at.get("axes")
        keep = bool(int(at.get("keepdims", 1)))
        if axes is None or np.size(axes) == 0:
            if int(at.get("noop_with_empty_axes", 0)):
                return [ins[0]]
            axes = list(range(ins[0].ndim))
        red = tuple(_axes(axes, ins[0].ndim))
        return [np.asarray(fn(ins[0], axis=red, keepdims=keep)).astype(ins[0].dtype)]
    return fold


def _same_type(fn: Callable) -> FoldFn:
    """An element-wise numpy function whose result keeps the first input's dtype."""
    return lambda ins, at, sh: [np.asarray(fn(*[a for a in ins if a is not None])
                                           ).astype(ins[0].dtype)]


def _boolean(fn: Callable) -> FoldFn:
    return lambda ins, at, sh: [np.asarray(fn(*ins), dtype=np.bool_)]


FOLDERS: dict[str, FoldFn] = {
    "Constant": _fold_constant,
    "ConstantOfShape": _fold_constant_of_shape,
    "Shape": _fold_shape,
    "Size": lambda ins, at, sh: [np.asarray(int(np.prod(sh[0])), np.int64)],
    "Identity": lambda ins, at, sh: [ins[0]],
    "Cast": _fold_cast,
    "CastLike": _fold_cast,  # fold() sets 'to' from the type of input 1
    "Gather": lambda ins, at, sh: [np.take(ins[0], ins[1].astype(np.int64),
                                           axis=int(at.get("axis", 0)))],
    "Slice": lambda ins, at, sh: [_slice(ins[0], ins[1], ins[2], *(ins[3:5] + [None] * 2)[:2])],
    "Concat": lambda ins, at, sh: [np.concatenate([np.atleast_1d(a) if a.ndim == 0 else a
                                                   for a in ins if a is not None],
                                                  axis=int(at["axis"]))],
    "Squeeze": _fold_squeeze,
    "Unsqueeze": _fold_unsqueeze,
    "Reshape": lambda ins, at, sh: [ins[0].reshape(_reshape_target(
        ins[0].shape, ins[1], int(at.get("allowzero", 0))))],
    "Flatten": lambda ins, at, sh: [_flatten(ins[0], int(at.get("axis", 1)))],
    "Transpose": lambda ins, at, sh: [np.transpose(ins[0], at.get("perm"))],
    "Expand": lambda ins, at, sh: [ins[0] * np.ones(tuple(int(d) for d in ins[1]),
                                                    dtype=ins[0].dtype)],
    "Range": lambda ins, at, sh: [np.arange(ins[0], ins[1], ins[2]).astype(ins[0].dtype)],
    "Add": lambda ins, at, sh: [(ins[0] + ins[1]).astype(ins[0].dtype)],
    "Sub": lambda ins, at, sh: [(ins[0] - ins[1]).astype(ins[0].dtype)],
    "Mul": lambda ins, at, sh: [(ins[0] * ins[1]).astype(ins[0].dtype)],
    "Div": lambda ins, at, sh: [_div(ins[0], ins[1])],
    "Neg": lambda ins, at, sh: [-ins[0]],
    "Equal": lambda ins, at, sh: [np.equal(ins[0], ins[1])],
    "Where": lambda ins, at, sh: [np.where(ins[0], ins[1], ins[2])],
    "Split": _fold_split,
    "Trilu": _fold_trilu,
    "Tile": lambda ins, at, sh: [np.tile(ins[0], tuple(int(r) for r in np.ravel(ins[1])))],
    "Less": _boolean(np.less),
    "LessOrEqual": _boolean(np.less_equal),
    "Greater": _boolean(np.greater),
    "GreaterOrEqual": _boolean(np.greater_equal),
    "Not": _boolean(np.logical_not),
    "And": _boolean(np.logical_and),
    "Or": _boolean(np.logical_or),
    "Xor": _boolean(np.logical_xor),
    "Max": _same_type(lambda *a: np.maximum.reduce(np.broadcast_arrays(*a))),
    "Min": _same_type(lambda *a: np.minimum.reduce(np.broadcast_arrays(*a))),
    "Abs": _same_type(np.abs),
    "Sqrt": _same_type(np.sqrt),
    "Pow": _same_type(np.power),
    "Mod": lambda ins, at, sh: [(np.fmod(ins[0], ins[1]) if int(at.get("fmod", 0))
                                 else np.mod(ins[0], ins[1])).astype(ins[0].dtype)],
    "ReduceSum": _fold_reduce(np.sum),
    "ReduceMean": _fold_reduce(np.mean),
    "ReduceMax": _fold_reduce(np.max),
    "ReduceMin": _fold_reduce(np.min),
    "ReduceProd": _fold_reduce(np.prod),
}

#: Ops folded when only their input's *shape* is needed (its value may live on the device).
_SHAPE_ONLY = frozenset({"Shape", "Size"})

#: Sequence operators handled when the sequence is a split of one tensor.
SEQUENCE_OPS = frozenset({"SplitToSequence", "SequenceAt"})

#: Ops folded when only the inputs at these positions are constants (the others give a type).
_VALUE_INPUTS = {"CastLike": (0,)}


# ----------------------------------------------------------------------------------------------
# The translation
# ----------------------------------------------------------------------------------------------

#: Row reductions whose producing matrix product gets one work-group per row
#: (:meth:`_Translator.whole_rows_for`).
ROW_REDUCTIONS = frozenset({"Softmax", "LayerNormalization"})
#: Most element-wise launches between such a product and its row reduction.
ROW_CHAIN_DEPTH = 8


@dataclass(frozen=True)
class _LaunchSpec:
    """What one node's kernel was generated from, and where its launch is in the op list."""

    node: Any
    op: str
    label: str
    where: str
    attrs: dict[str, Any]
    in_shapes: tuple[Optional[tuple[int, ...]], ...]
    out_shapes: tuple[Optional[tuple[int, ...]], ...]
    op_index: int


class _Translator:
    """Walks the (topologically sorted) nodes once, building buffers, host ops and launches."""

    def __init__(self, model: Any, path: str, max_wg: int, local_mem: int, fp16: bool,
                 variant: KernelVariant, initializers: Mapping[str, np.ndarray]):
        from polyfuse.oplib import op_kernel

        #: whether the target has cl_khr_fp16: float16 tensors live in half buffers
        self.fp16 = fp16
        self.op_kernel = op_kernel
        self.model = model
        self.path = path
        self.max_wg = max_wg
        self.local_mem = local_mem
        #: the kernel layout the target asks for
        self.variant = variant
        self.graph = model.graph
        self.opset = max((int(i.version) for i in model.opset_import
                          if i.domain in ("", "ai.onnx")), default=MAX_OPSET)
        self.consts: dict[str, np.ndarray] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.types: dict[str, int] = {}
        self.tensor_buffer: dict[str, str] = {}  # tensor name -> buffer
        self.buffers: dict[str, tuple[int, str]] = {}  # buffer -> (bytes, element type)
        self.data: dict[str, np.ndarray] = {}
        self.ops: list[tuple] = []  # ("write"|"read", buffer) or ("launch", OpKernel, args)
        self.kernels: dict[str, Any] = {}  # kernel name -> OpKernel
        self.names: set[str] = set()
        self.nodes: dict[str, NodeOutcome] = {}
        #: sequence name -> its tensors as (source tensor, axis, start, end, keep the axis)
        self.sequences: dict[str, list[tuple[str, int, int, int, bool]]] = {}
        self.index_bounds: dict[str, tuple[int, str]] = {}
        #: buffer -> the block layout of the register-blocked launch that wrote it
        self.layouts: dict[str, Any] = {}
        #: kernel name -> how it was generated (to regenerate it in another form)
        self.specs: dict[str, _LaunchSpec] = {}
        #: buffer -> the kernel that wrote it last
        self.writer: dict[str, str] = {}
        self._collect_value_info(initializers)

    def error(self, message: str, cls: type = PolyfuseError) -> PolyfuseError:
        return cls(message, self.path)

    # -- shapes and types ------------------------------------------------------------------
    def _collect_value_info(self, initializers: Mapping[str, np.ndarray]) -> None:
        g = self.graph
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
            if tt is None:
                continue
            if tt.elem_type:
                self.types[vi.name] = tt.elem_type
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                self.shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
        for init in g.initializer:
            self.consts[init.name] = initializers[init.name]
            self.shapes[init.name] = tuple(self.consts[init.name].shape)
            self.types[init.name] = init.data_type

    def shape(self, tensor: str, where: str) -> tuple[int, ...]:
        if tensor in self.consts:
            return tuple(self.consts[tensor].shape)
        if tensor in self.shapes:
            return self.shapes[tensor]
        raise self.error(f"{where}: tensor '{tensor}' has an unknown shape after shape "
                         "inference (polyfuse needs static shapes)")

    def infer_node(self, node: Any) -> None:
        """Output shapes and types of ``node`` that the whole-graph inference left unknown.

        ONNX's data propagation stops at operators it does not evaluate (a ``Div`` in the size
        arithmetic TorchScript emits for ``chunk``, say), leaving every shape downstream unknown.
        Here the size sub-graphs are already folded, so the node is inferred again on its own
        with the host constants as input data; its outputs' shapes then feed the next node.
        """
        from onnx import defs, helper, numpy_helper, shape_inference

        if all(not t or t in self.shapes for t in node.output):
            return
        try:
            schema = defs.get_schema(node.op_type, self.opset, node.domain or "")
        except Exception:  # onnx raises SchemaError, not exported under a stable name
            return
        types: dict[str, Any] = {}
        data: dict[str, Any] = {}
        for tensor in node.input:
            if not tensor:
                continue
            dt = self.types.get(tensor)
            if tensor in self.consts:
                value = self.consts[tensor]
                if value.size <= 1024:
                    data[tensor] = numpy_helper.from_array(value, tensor)
                shape: Optional[tuple] = tuple(value.shape)
                dt = helper.np_dtype_to_tensor_dtype(value.dtype)
            else:
                shape = self.shapes.get(tensor)
            if not dt:
                return
            types[tensor] = helper.make_tensor_type_proto(dt, shape)
        try:
            out = shape_inference.infer_node_outputs(
                schema, node, types, input_data=data,
                opset_imports=[helper.make_opsetid("", self.opset)])
        except Exception:  # an inference failure leaves the shape unknown (reported later)
            return
        for name, tp in out.items():
            tt = tp.tensor_type
            if tt.elem_type and name not in self.types:
                self.types[name] = tt.elem_type
            if name not in self.shapes and tt.HasField("shape") and \
                    all(d.HasField("dim_value") for d in tt.shape.dim):
                self.shapes[name] = tuple(int(d.dim_value) for d in tt.shape.dim)

    def float_ctype(self, tensor: str, what: str) -> str:
        """The buffer type of a tensor read or written as float: ``half`` for float16 where
        the target has ``cl_khr_fp16`` (an error naming ``what`` where it has not)."""
        if self.np_type(tensor) != np.float16:
            return "float"
        if not self.fp16:
            raise self.error(f"{what} is float16 and the device has no cl_khr_fp16 (`polyfuse "
                             "devices --json` lists each device's extensions): convert the "
                             "model to float32 or choose a device with half precision",
                             UnsupportedError)
        return "half"

    def np_type(self, tensor: str) -> Optional[np.dtype]:
        if tensor in self.consts:
            return self.consts[tensor].dtype
        t = self.types.get(tensor)
        return _np_dtype(t) if t else None

    # -- buffers ---------------------------------------------------------------------------
    def new_name(self, text: str, fallback: str) -> str:
        base = _identifier(text, fallback)
        name, i = base, 1
        while name in self.names:
            i += 1
            name = f"{base}_{i}"
        self.names.add(name)
        return name

    def new_buffer(self, tensor: str, shape: Sequence[int], ctype: str) -> str:
        name = self.new_name(tensor, "t")
        itemsize = _NP_OF_BUFFER[ctype].itemsize if ctype != "uchar" else 1
        nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
        if nbytes <= 0:
            raise self.error(f"tensor '{tensor}' has shape {tuple(shape)} with no elements "
                             "(empty tensors are not supported)", UnsupportedError)
        self.buffers[name] = (nbytes, ctype)
        self.tensor_buffer[tensor] = name
        return name

    def const_buffer(self, tensor: str, ctype: str, where: str) -> str:
        """The buffer holding a host constant that a kernel reads (made once per tensor)."""
        if tensor in self.tensor_buffer:
            buf = self.tensor_buffer[tensor]
            if self.buffers[buf][1] != ctype:
                raise self.error(f"{where}: constant '{tensor}' is used as {ctype} and as "
                                 f"{self.buffers[buf][1]}", UnsupportedError)
            return buf
        value = self.consts[tensor]
        value = self.convert(value, ctype, f"{where}: constant '{tensor}'")
        buf = self.new_buffer(tensor, value.shape, ctype)
        self.data[buf] = np.ascontiguousarray(value).reshape(-1)
        return buf

    def convert(self, value: np.ndarray, ctype: str, what: str) -> np.ndarray:
        if ctype in ("float", "half"):
            if value.dtype != _NP_OF_BUFFER[ctype]:
                raise self.error(f"{what} is {value.dtype}; only float32 (and float16) tensors "
                                 "are supported here", UnsupportedError)
            return value
        if ctype == "int":
            if value.dtype not in (np.int32, np.int64):
                raise self.error(f"{what} is {value.dtype}; indices must be int32 or int64",
                                 UnsupportedError)
            if value.size and (value.max() > np.iinfo(np.int32).max
                               or value.min() < np.iinfo(np.int32).min):
                raise self.error(f"{what} does not fit in int32", UnsupportedError)
            return value.astype(np.int32)
        if value.dtype != np.bool_:
            raise self.error(f"{what} is {value.dtype}; a Where condition must be bool",
                             UnsupportedError)
        return value.astype(np.uint8)

    # -- graph inputs and outputs ----------------------------------------------------------
    def graph_inputs(self) -> list[TensorInfo]:
        infos = []
        inits = {t.name for t in self.graph.initializer}
        for vi in self.graph.input:
            if vi.name in inits:
                continue
            shape = self.shape(vi.name, f"input '{vi.name}'")
            dt = self.np_type(vi.name)
            if dt in (np.float32, np.float16):
                ctype = self.float_ctype(vi.name, f"input '{vi.name}'")
            elif dt in (np.int64, np.int32):
                ctype = "int"
            elif dt == np.bool_:
                ctype = "uchar"
            else:
                raise self.error(f"input '{vi.name}' has element type {dt}; polyfuse supports "
                                 "float32 and float16 tensors (int32/int64 only as Gather "
                                 "indices, bool only as a Where condition)", UnsupportedError)
            buf = self.new_buffer(vi.name, shape, ctype)
            self.ops.append(("write", buf))
            infos.append(TensorInfo(vi.name, buf, shape, np.dtype(dt)))
        return infos

    def graph_outputs(self) -> list[TensorInfo]:
        infos = []
        for vi in self.graph.output:
            name = vi.name
            if name in self.tensor_buffer:
                buf = self.tensor_buffer[name]
            elif name in self.consts:
                value = self.consts[name]
                ctype = {np.dtype(np.float32): "float", np.dtype(np.int32): "int",
                         np.dtype(np.int64): "int", np.dtype(np.bool_): "uchar",
                         np.dtype(np.float16): "half"}.get(value.dtype)
                if ctype is None:
                    raise self.error(f"output '{name}' is a constant of type {value.dtype}, "
                                     "which polyfuse cannot hold in a buffer", UnsupportedError)
                buf = self.const_buffer(name, ctype, f"output '{name}'")
            else:
                raise self.error(f"output '{name}' is not produced by any node")
            self.ops.append(("read", buf))
            shape = self.shape(name, f"output '{name}'")
            dt = self.np_type(name) or np.dtype(np.float32)
            infos.append(TensorInfo(name, buf, tuple(shape), np.dtype(dt)))
        return infos

    # -- nodes -----------------------------------------------------------------------------
    def node(self, index: int, node: Any) -> None:
        op = node.op_type
        label = node.name or f"{op}_{index}"
        where = f"node '{label}' ({op})"
        if node.domain not in ("", "ai.onnx"):
            raise self.error(f"{where}: operator domain '{node.domain}' is not supported",
                             UnsupportedError)
        attrs = _attrs(node, where, self.path)
        ins = list(node.input)
        if op in SEQUENCE_OPS:
            self.nodes[label] = self.sequence_op(index, node, op, label, attrs, where)
            return
        if op in FOLDERS and self.foldable(op, ins):
            self.fold(node, op, attrs, where)
            self.nodes[label] = NodeOutcome(Fate.FOLDED)
            return
        self.infer_node(node)
        if (op in ALIAS_OPS or op == "Transpose" and self.moves_unit_axes_only(node, attrs, where)
                or op == "Pad" and self.pads_nothing(node)) and self.alias(node, op, attrs, where):
            self.nodes[label] = NodeOutcome(Fate.ALIAS, self.tensor_buffer[node.output[0]])
            return
        if op == "Gather" and self.gather_as_slice(index, node, label, attrs, where):
            return
        if op in ("MatMul", "Gemm") and "packed_panel" in attrs:  # the front-end's own
            raise self.error(f"{where}: attribute 'packed_panel' is not supported",
                             UnsupportedError)
        if op == "Gemm":
            node = self.pack_gemm_b(node, attrs)
        from polyfuse.oplib import INTERNAL_OPERATORS

        if op in INTERNAL_OPERATORS:  # the front-end's own operators, never a model's
            raise self.error(f"{where}: operator '{op}' is not supported", UnsupportedError)
        if op == "Conv":
            for own in ("packed_weights", "im2col"):  # the front-end's, never a model's
                if own in attrs:
                    raise self.error(f"{where}: attribute '{own}' is not supported",
                                     UnsupportedError)
            node = self.pad_conv_input(index, node, label, attrs, where)
            node = self.conv_as_product(index, node, label, attrs, where)
            node = self.pack_conv_weights(
                self.subsample_conv_input(index, node, label, attrs, where), attrs)
        if op in ("MatMul", "Gemm") and self.split_k(index, node, op, label, attrs, where):
            return
        self.launch(index, node, op, label, attrs, where)

    def pack_gemm_b(self, node: Any, attrs: dict[str, Any]) -> Any:
        """A Gemm whose constant B is transposed (``transB=1``, how PyTorch exports a Linear
        layer) reads B's columns K floats apart: the kernel's column loads do not vectorize (a
        third of a BERT layer's time).  Transpose the constant once here, so the node becomes
        a plain Gemm that reads B's rows contiguously; ``node`` and ``attrs`` are rewritten
        (a copy of the node)."""
        if len(node.input) < 2 or node.input[1] not in self.consts:
            return node
        if int(attrs.get("transB", 0)) == 0 or self.consts[node.input[1]].ndim != 2:
            return node
        attrs["transB"] = 0
        return self.with_packed_b(node, "transposed", lambda b: b.T)

    def pack_product_panels(self, node: Any, op: str, attrs: dict[str, Any],
                            in_shapes: Sequence[Optional[tuple[int, ...]]]) -> Any:
        """A blocked product's constant B (``K x N``, or ``S x K x N`` after a split of K),
        its columns regrouped once here into the panels the kernel's work-items read: panel
        ``p`` holds columns ``p*CB .. p*CB+CB-1`` of every row, K x CB contiguous floats.  Read
        in place, a work-item's panel rows are N floats apart, and at N = 3072 (BERT-base's
        FFN) that pitch is a multiple of 4 KiB: every row of the panel falls in the same L1
        sets (128x3072x768: 78 GFLOP/s in place, 106 packed; PoCL 3.1, one thread).  The
        tensor keeps its logical shape; the node gets the front-end's ``packed_panel`` = CB
        (:func:`polyfuse.oplib.linalg.matmul`).  ``node`` and ``attrs`` are rewritten."""
        from polyfuse.oplib.linalg import block_shape

        if self.variant.product_form != "blocked" or len(node.input) < 2 or \
                node.input[1] not in self.consts or len(in_shapes) < 2:
            return node
        sa, sb = in_shapes[0], in_shapes[1]
        if sa is None or sb is None:
            return node
        if op == "Gemm":
            if int(attrs.get("transB", 0)) or len(sa) != 2 or len(sb) != 2:
                return node
            m, (k, n) = (sa[1] if int(attrs.get("transA", 0)) else sa[0]), sb
        elif len(sb) == 2 and sa:
            m, (k, n) = int(np.prod(sa[:-1])), sb  # a shared B: the batch folds into M
        elif len(sb) == 3 and len(sa) == 3 and sa[0] == sb[0]:
            m, k, n = sa[1], sb[1], sb[2]
        else:
            return node
        cb = block_shape(m, n, k, self.variant.block_cols, self.variant.vector_width)[1]
        if cb >= n or n % cb:
            return node  # one panel is B itself
        attrs["packed_panel"] = cb
        return self.with_packed_b(node, f"panels{cb}", lambda w: w.reshape(
            *w.shape[:-1], n // cb, cb).swapaxes(-3, -2).reshape(w.shape))

    def with_packed_b(self, node: Any, tag: str, pack: Callable[[np.ndarray], np.ndarray]
                      ) -> Any:
        """A copy of ``node`` whose constant input 1 is ``pack`` of it, made contiguous once
        per constant and ``tag`` (layers sharing weights share the packed copy)."""
        packed = f"{node.input[1]}__{tag}"
        if packed not in self.consts:
            self.consts[packed] = np.ascontiguousarray(pack(self.consts[node.input[1]]))
            self.shapes[packed] = tuple(self.consts[packed].shape)
        copy = type(node)()
        copy.CopyFrom(node)
        copy.input[1] = packed
        return copy

    def pad_conv_input(self, index: int, node: Any, label: str, attrs: dict[str, Any],
                       where: str) -> Any:
        """A padded Conv in the ``blocked`` variant reads a zero-padded copy of its input made
        by a Pad launch (shared by the Convs that pad the same tensor alike): the Conv kernel's
        window loads are then unguarded and contiguous along the output row
        (:func:`polyfuse.oplib.linalg.conv_block_shape`); under a guard per load nothing
        vectorized (ResNet-50's 3x3 Conv at 0.3x numpy's sgemm).  Not where the kernel's
        blocks are whole output rows (depthwise:
        :func:`polyfuse.oplib.linalg.conv_pads_in_kernel`), which skip the pads unguarded.
        ``node`` and ``attrs`` are rewritten (a copy of the node, its pads 0)."""
        from onnx import helper

        from polyfuse.oplib.linalg import BLOCK_ROWS, conv_pads_in_kernel, explicit_pads

        if self.variant.product_form != "blocked" or len(node.input) < 2 or \
                node.input[0] not in self.tensor_buffer:
            return node
        x, sx, sw = node.input[0], self.shape(node.input[0], where), \
            self.shape(node.input[1], where)
        nd = len(sx) - 2
        if nd not in (1, 2) or len(sw) != len(sx):
            return node  # the Conv kernel reports the unsupported rank
        strides, dil = attrs.get("strides") or [1] * nd, attrs.get("dilations") or [1] * nd
        pads = explicit_pads(str(attrs.get("auto_pad", "NOTSET")), attrs.get("pads"),
                             sx[2:], sw[2:], strides, dil)
        if pads is None or not any(pads) or min(pads) < 0 or len(strides) != nd:
            return node
        ow = (sx[-1] + pads[nd - 1] + pads[-1] - (sw[-1] - 1) * dil[-1] - 1) // strides[-1] + 1
        group = int(attrs.get("group", 1))
        if group > 0 and sw[0] % group == 0 and ow > 0 and conv_pads_in_kernel(
                sw[0] // group, ow, strides[-1], BLOCK_ROWS * self.variant.block_cols,
                dil[0] if nd == 2 else 1):
            return node  # the kernel's whole-row blocks read the padding themselves
        padded = f"{x}::padded_{'_'.join(map(str, pads))}"
        if padded not in self.tensor_buffer:
            self.shapes[padded] = (*sx[:2], *(n + pads[d] + pads[nd + d]
                                              for d, n in enumerate(sx[2:])))
            self.types[padded] = self.types.get(x, 1)
            self.launch(index, helper.make_node("Pad", [x], [padded],
                                                name=f"{node.name or 'Conv'}_pad"),
                        "Pad", label, {"mode": "constant",
                                       "pads": [0, 0, *pads[:nd], 0, 0, *pads[nd:]]}, where)
        copy = type(node)()
        copy.CopyFrom(node)
        copy.input[0] = padded
        attrs.pop("auto_pad", None)
        attrs["pads"] = [0] * (2 * nd)
        return copy

    def conv_as_product(self, index: int, node: Any, label: str, attrs: dict[str, Any],
                        where: str) -> Any:
        """An unpadded (:meth:`pad_conv_input`) dense KxK Conv whose direct kernel would run
        narrow blocks (:func:`polyfuse.oplib.linalg.conv_as_product`: ResNet's 28-, 14- and
        7-column rows, strided windows) in the ``blocked`` variant becomes an implicit GEMM: an
        ``Im2Col`` launch (shared by the Convs that read the same tensor through the same
        window) lays the windows out as (N, C*KH*KW, PP), PP the OH*OW pixels rounded up to
        a multiple of 16, in panels of the product's block width, and the Conv (the
        front-end's ``im2col`` attribute: that width) is the blocked product of its weights
        re-viewed as (M, C*KH*KW) and that; its bias,
        activation and residual still fuse into the product's blocks.  ``node`` and ``attrs``
        are rewritten (a copy of the node)."""
        from onnx import helper

        from polyfuse.oplib.linalg import (
            BLOCK_ROWS,
            conv_as_product,
            im2col_columns,
            im2col_panel,
        )

        if self.variant.product_form != "blocked" or len(node.input) < 2 or \
                node.input[0] not in self.tensor_buffer or node.input[1] not in self.consts or \
                int(attrs.get("group", 1)) != 1 or any(int(p) for p in attrs.get("pads") or []) \
                or str(attrs.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID"):
            return node
        x, sx, weights = node.input[0], self.shape(node.input[0], where), \
            self.consts[node.input[1]]
        strides = [int(v) for v in attrs.get("strides") or [1, 1]]
        dil = [int(v) for v in attrs.get("dilations") or [1, 1]]
        if len(sx) != 4 or weights.ndim != 4 or weights.shape[1] != sx[1] or \
                len(strides) != 2 or len(dil) != 2 or min(strides + dil) < 1:
            return node  # the Conv kernel reports what is wrong
        m, kh, kw = weights.shape[0], weights.shape[2], weights.shape[3]
        out_hw = [(n - (k - 1) * d - 1) // s + 1
                  for n, k, d, s in zip(sx[2:], (kh, kw), dil, strides)]
        if min(out_hw) < 1 or not conv_as_product(
                1, (kh, kw), out_hw, strides, m, BLOCK_ROWS * self.variant.block_cols,
                self.variant.vector_width):
            return node
        width = im2col_columns(out_hw[0] * out_hw[1], self.variant)
        # a 1x1 window's copy in the product's panels is affine; a larger window's divides
        # each pixel by the panel width, and the performance model's footprints of those
        # stores took the cold sessions of ResNet-50's stages 2-3x longer (rows, then)
        panel = im2col_panel(width, self.variant.block_cols) if (kh, kw, *strides) == \
            (1, 1, 1, 1) else width
        geometry = {"kernel_shape": [kh, kw], "strides": strides, "dilations": dil,
                    "panel": panel}
        cols = f"{x}::im2col_{kh}x{kw}_{'_'.join(map(str, strides + dil))}_{panel}"
        if cols not in self.tensor_buffer:
            self.shapes[cols] = (sx[0], sx[1] * kh * kw, width)
            self.types[cols] = self.types.get(x, 1)
            self.launch(index, helper.make_node("Im2Col", [x], [cols],
                                                name=f"{node.name or 'Conv'}_im2col"),
                        "Im2Col", label, geometry, where)
        copy = self.with_packed_b(node, "rows", lambda w: w.reshape(w.shape[0], -1))
        copy.input[0] = cols
        attrs.clear()
        attrs["im2col"] = panel
        return copy

    def subsample_conv_input(self, index: int, node: Any, label: str, attrs: dict[str, Any],
                             where: str) -> Any:
        """A 1x1 Conv at a stride (ResNet's projection shortcuts) in the ``blocked`` variant
        reads a strided Slice of its input made by a Slice launch (shared by the Convs that
        subsample the same tensor alike), and becomes a 1x1 Conv at stride 1: a product
        (:func:`polyfuse.oplib.linalg.conv`), where the direct Conv reads every other column.
        ``node`` and ``attrs`` are rewritten (a copy of the node, its strides 1)."""
        from onnx import helper

        strides = [int(v) for v in attrs.get("strides") or []]
        if self.variant.product_form != "blocked" or len(node.input) < 2 or \
                node.input[0] not in self.tensor_buffer or node.input[1] not in self.consts or \
                all(v == 1 for v in strides) or int(attrs.get("group", 1)) != 1:
            return node
        x, sx, sw = node.input[0], self.shape(node.input[0], where), \
            self.shape(node.input[1], where)
        nd = len(sx) - 2
        if nd not in (1, 2) or len(sw) != len(sx) or len(strides) != nd or \
                any(k != 1 for k in sw[2:]) or any(int(p) for p in attrs.get("pads") or []) or \
                str(attrs.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID") or \
                min(strides) < 1:
            return node
        sub = f"{x}::every_{'_'.join(map(str, strides))}"
        if sub not in self.tensor_buffer:
            self.shapes[sub] = (*sx[:2], *(-(-n // st) for n, st in zip(sx[2:], strides)))
            self.types[sub] = self.types.get(x, 1)
            axes = list(range(2, 2 + nd))
            self.launch(index, helper.make_node("Slice", [x], [sub],
                                                name=f"{node.name or 'Conv'}_subsample"),
                        "Slice", label, {"starts": [0] * nd, "ends": list(sx[2:]),
                                         "axes": axes, "steps": strides}, where)
        copy = type(node)()
        copy.CopyFrom(node)
        copy.input[0] = sub
        attrs["strides"] = [1] * nd
        return copy

    def pack_conv_weights(self, node: Any, attrs: dict[str, Any]) -> Any:
        """A direct Conv's constant weights in the ``blocked`` variant, packed once as
        (G, CPG, KH, KW, MPG): the block's output channels of one window step are then
        contiguous (:func:`polyfuse.oplib.linalg.conv`, ``packed_weights``; ResNet-50's 3x3 Conv
        went from 0.74-0.83x to 1.0-1.2x numpy's sgemm).  A 1x1 Conv that is a product keeps its
        weights (the product reads them row-major).  ``node`` and ``attrs`` are rewritten."""
        if self.variant.product_form != "blocked" or len(node.input) < 2 or \
                node.input[1] not in self.consts or self.consts[node.input[1]].ndim != 4:
            return node
        weights = self.consts[node.input[1]]
        group = int(attrs.get("group", 1))
        if group < 1 or weights.shape[0] % group:
            return node  # the Conv kernel reports the invalid group
        if group == 1 and weights.shape[2:] == (1, 1) and \
                all(int(s) == 1 for s in attrs.get("strides") or [1]):
            return node
        attrs["packed_weights"] = 1
        return self.with_packed_b(node, "packed", lambda w: w.reshape(
            group, w.shape[0] // group, *w.shape[1:]).transpose(0, 2, 3, 4, 1))

    def split_k(self, index: int, node: Any, op: str, label: str, attrs: dict[str, Any],
                where: str) -> bool:
        """A product by a constant ``K x N`` B whose output has too few register tiles to
        keep a GPU busy while K is long (:func:`polyfuse.oplib.linalg.split_k_ways`) becomes
        S products over K/S each and their sum, all existing operators: A ``[M, K]`` re-viewed
        as ``[M, S, K/S]``, a Transpose to ``[S, M, K/S]`` (covering A's producer's blocks), B
        folded to ``[S, K/S, N]``, one batched MatMul to ``[S, M, N]``, a ReduceSum over the S
        partial products (one looping work-item per output), then Gemm's ``C``.  The ``gpu``
        variant splits to fill the device, the ``blocked`` one to keep B's panels in cache;
        float32 only; a Gemm only with ``alpha = beta = 1`` and no ``transA``."""
        from onnx import helper

        from polyfuse.oplib.linalg import BLOCKED_SPLIT_PART, split_k_ways

        if len(node.input) < 2 or node.input[1] not in self.consts or \
                node.input[0] not in self.tensor_buffer or len(node.output) != 1:
            return False
        a, b, out = node.input[0], node.input[1], node.output[0]
        if op == "Gemm" and (int(attrs.get("transA", 0)) or int(attrs.get("transB", 0))
                             or float(attrs.get("alpha", 1.0)) != 1.0
                             or float(attrs.get("beta", 1.0)) != 1.0):
            return False
        a_shape, weights = self.shape(a, where), self.consts[b]
        if len(a_shape) < 2 or weights.ndim != 2 or weights.dtype != np.float32 or \
                self.np_type(a) != np.float32 or a_shape[-1] != weights.shape[0]:
            return False
        m, k, n = int(np.prod(a_shape[:-1])), a_shape[-1], weights.shape[1]
        ways = split_k_ways(self.variant, m, n, k, self.max_wg, self.local_mem)
        if ways == 1:
            return False
        part = k // ways
        name = node.name or op
        a_view, a_parts, b_parts = f"{out}::split_a", f"{out}::split_at", f"{b}::split{ways}"
        partial, total = f"{out}::split_partial", f"{out}::split_sum"
        self.tensor_buffer[a_view] = self.tensor_buffer[a]
        self.shapes[a_view] = (m, ways, part)
        self.shapes[a_parts] = (ways, m, part)
        self.consts[b_parts] = np.ascontiguousarray(weights.reshape(ways, part, n))
        self.shapes[b_parts] = (ways, part, n)
        self.shapes[partial] = (ways, m, n)
        self.shapes[total] = (m, n)
        for tensor in (a_view, a_parts, partial, total):
            self.types[tensor] = self.types.get(a, 1)
        self.launch(index, helper.make_node("Transpose", [a_view], [a_parts],
                                            name=f"{name}_split_a"),
                    "Transpose", label, {"perm": [1, 0, 2]}, where)
        self.launch(index, helper.make_node("MatMul", [a_parts, b_parts], [partial],
                                            name=f"{name}_split"), "MatMul", label, {}, where)
        product = self.nodes[label].what
        bias = node.input[2] if op == "Gemm" and len(node.input) > 2 else ""
        summed = total if bias or self.shape(out, where) != (m, n) else out
        self.launch(index, helper.make_node("ReduceSum", [partial], [summed],
                                            name=f"{name}_split_sum"),
                    "ReduceSum", label, {"axes": [0], "keepdims": 0}, where)
        if bias:
            self.launch(index, helper.make_node("Add", [total, bias], [out],
                                                name=f"{name}_bias"), "Add", label, {}, where)
        elif summed != out:  # the [M, N] sum re-viewed as the output's shape
            self.tensor_buffer[out] = self.tensor_buffer[total]
        if self.variant.product_form == "blocked":
            why = (f"a work-item's K x columns panel of B stays in cache for K up to "
                   f"{BLOCKED_SPLIT_PART}")
        else:
            why = (f"its {m}x{n} output alone gives too few work-groups for the device's "
                   f"{self.variant.device_groups} compute units")
        self.nodes[label] = replace(self.nodes[label], what=product, forms=(
            f"K={k} split {ways} ways: {why}; {ways} partial products over K={part} each, "
            f"then their sum",))
        return True

    def moves_unit_axes_only(self, node: Any, attrs: dict[str, Any], where: str) -> bool:
        """A Transpose that keeps every axis longer than 1 in order is a re-view (PyTorch's
        batch-first/sequence-first swaps at batch 1): no data moves, so it is an alias."""
        if not node.input or node.input[0] not in self.tensor_buffer:
            return False
        shape = self.shape(node.input[0], where)
        perm = attrs.get("perm")
        perm = list(range(len(shape) - 1, -1, -1)) if perm is None else [int(p) for p in perm]
        if sorted(perm) != list(range(len(shape))):
            return False  # the operator kernel reports the bad permutation
        kept = [p for p in perm if shape[p] != 1]
        return kept == sorted(kept)

    def pads_nothing(self, node: Any) -> bool:
        """A Pad whose pads are all 0 is a re-view: the UNet up block's ``F.pad`` to the skip
        connection's size, with pads computed from sizes that already match."""
        pads = node.input[1] if len(node.input) > 1 else ""
        return pads in self.consts and not np.any(self.consts[pads])

    def gather_as_slice(self, index: int, node: Any, label: str, attrs: dict[str, Any],
                        where: str) -> bool:
        """A Gather whose constant indices are one value or an arithmetic progression is a
        Slice (PyTorch's ``q, k, v = qkv[0], qkv[1], qkv[2]``): its reads become affine in the
        work-item instead of data-dependent whole-buffer reads, which lets it fuse."""
        from onnx import helper

        if len(node.input) < 2 or node.input[1] not in self.consts or \
                node.input[0] not in self.tensor_buffer:
            return False
        data = self.shape(node.input[0], where)
        raw = np.asarray(self.consts[node.input[1]])
        axis = int(attrs.get("axis", 0))
        axis = axis + len(data) if axis < 0 else axis
        if raw.ndim > 1 or raw.size == 0 or not 0 <= axis < len(data):
            return False
        self.check_gather_indices(node, attrs, where)
        size = data[axis]
        idx = [int(v) + size if int(v) < 0 else int(v) for v in raw.ravel()]
        step = idx[1] - idx[0] if len(idx) > 1 else 1
        if step == 0 or any(b - a != step for a, b in zip(idx, idx[1:])):
            return False
        end = idx[-1] + step
        if end < 0:  # past the front with a negative step: ONNX clamps -size-1 to "before 0"
            end = -size - 1
        out = node.output[0]
        names = [f"{out}::{k}" for k in ("starts", "ends", "axes", "steps")]
        for name, v in zip(names, (idx[0], end, axis, step)):
            self.consts[name] = np.array([v], np.int64)
        shape = list(data)
        shape[axis] = len(idx)
        final = self.shapes.get(out)
        self.shapes[out] = tuple(shape)
        self.types[out] = self.types.get(node.input[0], 1)
        sliced = helper.make_node("Slice", [node.input[0], *names], [out], name=node.name)
        self.launch(index, sliced, "Slice", label, {}, where)
        if raw.ndim == 0:  # a scalar index drops the axis: the same elements, re-viewed
            self.shapes[out] = final or tuple(shape[:axis] + shape[axis + 1:])
        return True

    def sequence_op(self, index: int, node: Any, op: str, label: str, attrs: dict[str, Any],
                    where: str) -> NodeOutcome:
        """``SplitToSequence`` then ``SequenceAt`` with constant positions (what the dynamo
        exporter emits for ``chunk``/``split`` without its optimizer): the sequence is a list of
        slices of one tensor, and each ``SequenceAt`` becomes a Split-like Slice of its own."""
        from onnx import helper

        if op == "SplitToSequence":
            src = node.input[0]
            shape = self.shape(src, where)
            axis = int(attrs.get("axis", 0))
            axis = axis + len(shape) if axis < 0 else axis
            if not 0 <= axis < len(shape):
                raise self.error(f"{where}: attribute 'axis'={attrs.get('axis')} is out of "
                                 f"range for {shape}")
            split_in = node.input[1] if len(node.input) > 1 else ""
            if split_in and split_in not in self.consts:
                raise self.error(f"{where}: input 1 ('split') must be a constant; it is "
                                 "computed on the device", UnsupportedError)
            keep = True
            if not split_in:
                sizes = [1] * shape[axis]
                keep = bool(int(attrs.get("keepdims", 1)))
            else:
                split = np.ravel(self.consts[split_in]).astype(int)
                if self.consts[split_in].ndim == 0:
                    n = -(-shape[axis] // int(split[0]))
                    sizes = [int(split[0])] * (n - 1) + [shape[axis] - int(split[0]) * (n - 1)]
                else:
                    sizes = [int(v) for v in split]
            if sum(sizes) != shape[axis] or min(sizes) < 1:
                raise self.error(f"{where}: split sizes {sizes} do not cover axis {axis} of "
                                 f"{shape}")
            starts = np.cumsum([0] + sizes)
            self.sequences[node.output[0]] = [(src, axis, int(a), int(b), keep)
                                              for a, b in zip(starts[:-1], starts[1:])]
            return NodeOutcome(Fate.SEQUENCE, f"sequence of {len(sizes)} slices of {src}")
        if op != "SequenceAt":
            raise self.error(f"{where}: sequence operator is not supported", UnsupportedError)
        seq, pos = node.input[0], node.input[1]
        if seq not in self.sequences:
            raise self.error(f"{where}: input 0 '{seq}' is not a sequence made by "
                             "SplitToSequence", UnsupportedError)
        if pos not in self.consts:
            raise self.error(f"{where}: input 1 ('position') must be a constant",
                             UnsupportedError)
        pieces = self.sequences[seq]
        i = int(np.ravel(self.consts[pos])[0])
        if not -len(pieces) <= i < len(pieces):
            raise self.error(f"{where}: position {i} is out of range for a sequence of "
                             f"{len(pieces)}")
        src, axis, start, end, keep = pieces[i]
        out = node.output[0]
        shape = list(self.shape(src, where))
        shape[axis] = end - start
        if src in self.consts:
            value = np.take(self.consts[src], np.arange(start, end), axis=axis)
            self.consts[out] = value if keep else np.squeeze(value, axis)
            self.shapes[out] = tuple(self.consts[out].shape)
            return NodeOutcome(Fate.FOLDED)
        names = [f"{out}::{k}" for k in ("starts", "ends", "axes")]
        for name, v in zip(names, (start, end, axis)):
            self.consts[name] = np.array([v], np.int64)
        sliced = helper.make_node("Slice", [src, *names], [out], name=node.name)
        self.shapes[out] = tuple(shape)
        self.types[out] = self.types.get(src, 1)
        self.launch(index, sliced, "Slice", label, {}, where)
        if not keep:  # the same elements without the unit axis: a re-view
            self.shapes[out] = tuple(shape[:axis] + shape[axis + 1:])
        return self.nodes[label]

    def foldable(self, op: str, ins: list[str]) -> bool:
        if op in _SHAPE_ONLY:
            return True
        if op in _VALUE_INPUTS:
            return all(ins[i] in self.consts for i in _VALUE_INPUTS[op] if i < len(ins))
        return all(t in self.consts for t in ins if t)

    def fold(self, node: Any, op: str, attrs: dict[str, Any], where: str) -> None:
        ins = [self.consts.get(t) if t else None for t in node.input]
        if op == "CastLike":
            attrs = dict(attrs, to=self.types.get(node.input[1], 0))
            if node.input[1] in self.consts:
                from onnx import helper

                attrs["to"] = helper.np_dtype_to_tensor_dtype(self.consts[node.input[1]].dtype)
        shapes = [self.shape(t, where) if t else () for t in node.input]
        shapes += [()] * len(node.output)
        try:
            outs = FOLDERS[op](ins, attrs, shapes)
        except KeyError as err:
            raise self.error(f"{where}: {err.args[0] if err.args else 'attribute'} is missing "
                             "or not supported", UnsupportedError) from None
        except (ValueError, TypeError, IndexError, np.AxisError) as err:
            raise self.error(f"{where}: cannot evaluate on the host: {_first_line(err)}"
                             ) from None
        for name, value in zip(node.output, outs):
            if name:
                value = np.asarray(value)
                self.consts[name] = value
                self.shapes[name] = tuple(value.shape)

    def alias(self, node: Any, op: str, attrs: dict[str, Any], where: str) -> bool:
        """Make the output name the input's buffer when ``op`` only re-views memory."""
        src = node.input[0] if node.input else ""
        if not src or src not in self.tensor_buffer or len(node.output) != 1:
            return False
        out = node.output[0]
        in_shape = self.shape(src, where)
        if op in ("Cast", "CastLike"):
            to = _np_dtype(int(attrs.get("to", 0))) if op == "Cast" else \
                self.np_type(node.input[1])
            floats = (np.float32, np.float16)
            if self.np_type(src) not in floats or to not in floats:
                what = f"attribute 'to'={attrs.get('to')}" if op == "Cast" else "input 1"
                raise self.error(f"{where}: {what}: only casts between float32 and float16 are "
                                 f"supported on device tensors (input is {self.np_type(src)}, "
                                 f"target {to})", UnsupportedError)
            if self.np_type(src) != to:
                return False  # a conversion: a copy kernel from one buffer type to the other
        for pos, tensor in enumerate(node.input[1:] if op != "CastLike" else (), 1):
            if tensor and tensor not in self.consts:
                raise self.error(f"{where}: input {pos} '{tensor}' must be a constant (it is "
                                 "computed on the device)", UnsupportedError)
        out_shape = self.shapes.get(out)
        if out_shape is None:
            if op == "Reshape":
                out_shape = _reshape_target(in_shape, self.consts[node.input[1]],
                                            int(attrs.get("allowzero", 0)))
            else:
                raise self.error(f"{where}: output '{out}' has an unknown shape after shape "
                                 "inference")
        if int(np.prod(out_shape)) != int(np.prod(in_shape)):
            raise self.error(f"{where}: output shape {tuple(out_shape)} does not hold the "
                             f"{int(np.prod(in_shape))} elements of input {tuple(in_shape)}")
        self.tensor_buffer[out] = self.tensor_buffer[src]
        self.shapes[out] = tuple(out_shape)
        self.types[out] = self.types.get(src, 1)
        return True

    def launch(self, index: int, node: Any, op: str, label: str, attrs: dict[str, Any],
               where: str) -> None:
        static = STATIC_INPUTS.get(op, {})
        kattrs = dict(attrs)
        in_shapes: list[Optional[tuple[int, ...]]] = []
        for pos, tensor in enumerate(node.input):
            if not tensor:
                in_shapes.append(None)
                continue
            if pos in static:
                if tensor not in self.consts:
                    raise self.error(f"{where}: input {pos} ('{static[pos]}') must be a "
                                     "constant; it is computed on the device",
                                     UnsupportedError)
                values = np.ravel(self.consts[tensor])
                kattrs[static[pos]] = [float(v) for v in values] if values.dtype.kind == "f" \
                    else [int(v) for v in values]
            in_shapes.append(self.shape(tensor, where))
        out_shapes: list[Optional[tuple[int, ...]]] = []
        for tensor in node.output:
            if not tensor:
                out_shapes.append(None)
                continue
            dt = self.np_type(tensor)
            if dt is not None and dt not in (np.float32, np.float16):
                raise self.error(f"{where}: output '{tensor}' is {dt}; only float32 (and "
                                 "float16) tensors are computed on the device", UnsupportedError)
            out_shapes.append(self.shape(tensor, where))
        if op == "Gather" and len(node.input) > 1:
            self.check_gather_indices(node, attrs, where)
        if op in ("MatMul", "Gemm"):
            node = self.pack_product_panels(node, op, kattrs, in_shapes)
        # the node index keeps names off OpenCL built-ins ("select", "exp") and oplib macros
        kname = self.new_name(f"{_identifier(node.name or op, op)}_{index}", f"{op}_{index}")
        if op in ROW_REDUCTIONS:
            self.whole_rows_for(node, op, kattrs, in_shapes, label)
        spec = _LaunchSpec(node, op, label, where, kattrs, tuple(in_shapes), tuple(out_shapes),
                           len(self.ops))
        opk = self.library_kernel(kname, spec, self.covering_layout(node, op, out_shapes))
        args: dict[str, str] = {}
        for pos, pname in enumerate(opk.inputs):
            if not pname:
                continue
            tensor = node.input[pos]
            ctype = _BUFFER_TYPES.get(opk.input_dtype(pos), "float")
            if ctype == "float":
                ctype = self.float_ctype(tensor, f"{where}: input {pos} '{tensor}'")
            if tensor in self.tensor_buffer:
                buf = self.tensor_buffer[tensor]
                have = self.buffers[buf][1]
                if have != ctype:
                    dt = self.np_type(tensor)
                    raise self.error(
                        f"{where}: input {pos} '{tensor}' is {dt}; only float32 (and float16) "
                        "tensors are supported (int32/int64 only as Gather indices, bool only "
                        "as a Where condition)", UnsupportedError)
            elif tensor in self.consts:
                buf = self.const_buffer(tensor, ctype, f"{where}: input {pos}")
            else:
                raise self.error(f"{where}: input '{tensor}' is not produced by an earlier node")
            args[pname] = buf
        for pos, pname in enumerate(opk.outputs):
            if pname:
                tensor = node.output[pos]
                ctype = self.float_ctype(tensor, f"{where}: output '{tensor}'")
                args[pname] = self.new_buffer(tensor, out_shapes[pos] or (), ctype)
        if opk.block is not None:
            self.layouts[args[opk.outputs[0]]] = opk.block
        self.kernels[kname] = opk
        self.ops.append(("launch", opk, args))
        self.nodes[label] = NodeOutcome(Fate.LAUNCH, kname)
        self.specs[kname] = spec
        for pname in opk.outputs:
            if pname:
                self.writer[args[pname]] = kname

    def library_kernel(self, kname: str, spec: _LaunchSpec, layout: Any = None,
                       whole_rows: bool = False, row_of_group: str = "grp") -> Any:
        """The node's kernel: covering ``layout``'s blocks when given, else the library's
        (whole-row products on request); errors name the node."""
        try:
            if layout is not None:
                from polyfuse.oplib.blocked import blocked_kernel

                return self.stored_half(spec, blocked_kernel(
                    spec.op, spec.attrs, spec.in_shapes, spec.out_shapes, layout, name=kname,
                    max_work_group_size=self.max_wg, local_mem_size=self.local_mem))
            return self.stored_half(spec, self.op_kernel(
                spec.op, spec.attrs, spec.in_shapes, spec.out_shapes, name=kname,
                max_work_group_size=self.max_wg, local_mem_size=self.local_mem,
                whole_rows=whole_rows, row_of_group=row_of_group, variant=self.variant))
        except PolyfuseError as err:
            msg = re.sub(r"^\w+ \(kernel '[^']*'\): ", "", err.message)
            raise type(err)(f"{spec.where}: {msg}", self.path) from None

    def stored_half(self, spec: _LaunchSpec, opk: Any) -> Any:
        """``opk`` with its float16 tensors' buffers declared ``half`` (float arithmetic)."""
        from polyfuse.oplib._common import with_half

        node = spec.node
        half = [p for pos, p in enumerate(opk.inputs) if p and opk.input_dtype(pos) == "float32"
                and self.np_type(node.input[pos]) == np.float16]
        half += [p for pos, p in enumerate(opk.outputs)
                 if p and self.np_type(node.output[pos]) == np.float16]
        return with_half(opk, half) if half else opk

    def whole_rows_for(self, node: Any, op: str, attrs: dict[str, Any],
                       in_shapes: Sequence[Optional[tuple]], label: str) -> None:
        """Before a row reduction (Softmax over the last axis, LayerNormalization) is
        generated: regenerate the matrix product that computes its rows, and the element-wise
        and row-moving Transpose launches between them, with one work-group per row of the
        reduction (the product computing the row that lands there), laid out like the reduction
        (:func:`polyfuse.oplib.linalg.row_form_problem`).  Every dependence on the way is then
        thread-width on one launch shape, which fusion joins.  Only the tiled product form has
        the whole-row layout; a row too wide for it keeps the tiled kernel, and the product's
        node says why."""
        shape = in_shapes[0] if in_shapes else None
        if self.variant.product_form != "tiled" or not shape:
            return
        try:
            axis = int(attrs.get("axis", -1))
        except (TypeError, ValueError):
            return  # the operator kernel reports the bad attribute
        axis = axis + len(shape) if axis < 0 else axis
        if not 0 <= axis < len(shape) or op == "Softmax" and axis != len(shape) - 1:
            return
        n, total = int(np.prod(shape[axis:])), int(np.prod(shape))
        # the first chain whose product is still tiled (a pre-LN residual stream also leads
        # back to the products of earlier sub-layers, already laid out for their own rows)
        chain = next((c for c in self.row_chains(self.tensor_buffer.get(node.input[0], ""),
                                                  n, total)
                      if self.kernels[c[0]].block is None), None)
        if chain is None:
            return
        # the row each kernel's output has at work-group ``grp``: the reduction's own row,
        # taken back through every row-permuting Transpose on the way
        lead, leads = "grp", {}
        for kname in reversed(chain):
            leads[kname] = lead
            if self.specs[kname].op == "Transpose":
                lead = self.row_source(self.specs[kname], lead)
        product = self.specs[chain[0]]
        opk = self.library_kernel(chain[0], product, whole_rows=True, row_of_group=leads[chain[0]])
        if opk.block is None:
            said = self.nodes[product.label]
            if not said.forms:  # said once per product
                self.nodes[product.label] = replace(
                    said, forms=(f"{opk.note or 'tiled'}; rows for {label}",))
            return
        said = self.nodes[product.label]
        self.nodes[product.label] = replace(
            said, forms=said.forms + (f"one work-group per row for {label}",))
        self.replace_kernel(chain[0], opk)
        for prev, kname in zip(chain, chain[1:]):
            layout = replace(opk.block, lead=leads[prev])  # the layout of its chain input
            self.replace_kernel(kname, self.library_kernel(kname, self.specs[kname], layout))

    @staticmethod
    def moves_rows(spec: _LaunchSpec, n: int) -> bool:
        """Whether a Transpose keeps its last axis, of ``n`` elements: it moves whole rows."""
        shape = spec.in_shapes[0] if spec.in_shapes else None
        if not shape or shape[-1] != n:
            return False
        perm = spec.attrs.get("perm")
        perm = list(range(len(shape) - 1, -1, -1)) if perm is None else [int(p) for p in perm]
        return sorted(perm) == list(range(len(shape))) and perm[-1] == len(shape) - 1

    @staticmethod
    def row_source(spec: _LaunchSpec, row: str) -> str:
        """The input row a row-moving Transpose (:meth:`moves_rows`) writes to output row
        ``row`` (a C expression): quasi-affine in ``row``."""
        from polyfuse.oplib._common import index_expr, strides_of

        shape = spec.in_shapes[0] or ()
        perm = spec.attrs.get("perm")
        perm = list(range(len(shape) - 1, -1, -1)) if perm is None else [int(p) for p in perm]
        rows_in = strides_of(shape[:-1])
        return index_expr(row, [shape[p] for p in perm[:-1]], [rows_in[p] for p in perm[:-1]])

    def row_chains(self, buf: str, n: int, total: int, depth: int = 0
                   ) -> Iterator[list[str]]:
        """Kernels from a MatMul/Gemm with output rows of ``n`` (``total`` elements) through
        element-wise launches of the same size and Transposes that move whole rows to the
        writer of ``buf``, product first: every such chain of at most
        :data:`ROW_CHAIN_DEPTH` launches after the product, depth first in input order."""
        from polyfuse.oplib.blocked import BLOCKED_OPS

        kname = self.writer.get(buf)
        if kname is None:
            return
        spec = self.specs[kname]
        out = spec.out_shapes[0] if spec.out_shapes else None
        if not out or int(np.prod(out)) != total:
            return
        if spec.op in ("MatMul", "Gemm"):
            one_d = spec.op == "MatMul" and len(spec.in_shapes[1] or ()) < 2
            if out[-1] == n and not one_d:
                yield [kname]
            return
        if spec.op not in BLOCKED_OPS or depth >= ROW_CHAIN_DEPTH or \
                spec.op == "Transpose" and not self.moves_rows(spec, n):
            return
        for tensor in spec.node.input:
            for chain in self.row_chains(self.tensor_buffer.get(tensor, ""), n, total,
                                         depth + 1):
                yield chain + [kname]

    def replace_kernel(self, kname: str, opk: Any) -> None:
        """Put ``opk`` in place of kernel ``kname``'s launch (same buffers, same position)."""
        spec = self.specs[kname]
        _, old, old_args = self.ops[spec.op_index]
        ins = [old_args.get(p) for p in old.inputs]
        outs = [old_args.get(p) for p in old.outputs]
        args = {p: ins[i] for i, p in enumerate(opk.inputs) if p}
        args.update({p: outs[i] for i, p in enumerate(opk.outputs) if p})
        self.ops[spec.op_index] = ("launch", opk, args)
        self.kernels[kname] = opk
        if opk.block is not None:
            self.layouts[args[opk.outputs[0]]] = opk.block

    def covering_layout(self, node: Any, op: str, out_shapes: Sequence[Optional[tuple]]
                        ) -> Any:
        """The block layout of a register-blocked producer of one of the node's inputs when
        the node has a form covering its blocks (:mod:`polyfuse.oplib.blocked`): then the
        dependence is thread-width and fusion joins the node to its producer."""
        from polyfuse.oplib.blocked import covers

        if len(out_shapes) != 1 or out_shapes[0] is None:
            return None
        if self.variant.product_form == "tiled":
            # the tiled form's only layouts are whole-row products': the launches between one
            # and its row reduction take its layout when that reduction is generated
            # (whole_rows_for); any other consumer fuses better with tiled producers as is
            return None
        for tensor in node.input:
            layout = self.layouts.get(self.tensor_buffer.get(tensor, ""))
            if layout is not None and covers(op, layout, out_shapes[0]):
                return layout
        return None

    def check_gather_indices(self, node: Any, attrs: dict[str, Any], where: str) -> None:
        """Constant Gather indices must lie in ``[-size, size-1]`` (onnxruntime rejects the
        model otherwise; the kernel would only clamp them)."""
        data = self.shape(node.input[0], where)
        if not data:
            return
        axis = int(attrs.get("axis", 0))
        axis = axis + len(data) if axis < 0 else axis
        if not 0 <= axis < len(data):
            return  # the operator kernel reports the bad axis
        size = data[axis]
        if node.input[1] not in self.consts:
            old = self.index_bounds.get(node.input[1])
            if old is None or size < old[0]:
                self.index_bounds[node.input[1]] = (size, where)
            return
        idx = np.asarray(self.consts[node.input[1]]).astype(np.int64).ravel()
        bad = idx[(idx < -size) | (idx >= size)]
        if bad.size:
            raise self.error(f"{where}: index {int(bad[0])} in '{node.input[1]}' is out of range "
                             f"for axis {axis} of size {size} (valid: {-size}..{size - 1})")

    # -- result ----------------------------------------------------------------------------
    def program(self, name: str) -> Program:
        from polyfuse.core.program import KernelContext
        from polyfuse.frontend.builder import ProgramBuilder
        from polyfuse.frontend.opencl import parse_kernel_batch

        items = []
        for kname, opk in self.kernels.items():
            ls = tuple(opk.local_size or ())
            ctx = KernelContext(local_size=tuple(ls) + (None,) * (3 - len(ls)),
                                global_size=tuple(opk.global_size)
                                + (None,) * (3 - len(opk.global_size)))
            items.append((opk.source, f"<{name}:{kname}>", ctx))
        try:
            # one preprocessor run and one parse for all operator kernels (not one per node)
            parsed = parse_kernel_batch(items)
        except PolyfuseError as err:
            raise self.error(f"{err.file or ''}: {err.message}") from None
        kernels = {k.name: k for k in parsed}
        b = ProgramBuilder(kernels, name=name, files=(self.path,))
        for buf, (nbytes, ctype) in self.buffers.items():
            b.buffer(buf, nbytes, dtype=ctype)
        for item in self.ops:
            if item[0] == "write":
                b.write(item[1])
            elif item[0] == "read":
                b.read(item[1], blocking=True)
            else:
                _, opk, args = item
                b.launch(opk.name, opk.global_size, opk.local_size, args)
        return replace(b.build(), data=dict(self.data))


def load_onnx_model(path: Union[str, os.PathLike], *, params: Optional[Mapping[str, int]] = None,
                    target: Target = REFERENCE_TARGET, max_work_group_size: Optional[int] = None,
                    local_mem_size: Optional[int] = None) -> OnnxModel:
    """Read an ONNX file into an :class:`OnnxModel` (see the module docstring for the rules).

    Kernels are tiled for ``target``'s limits (or the explicit ``max_work_group_size`` /
    ``local_mem_size``) and laid out as its kernel variant says (``target.kernel``), so one
    model can be specialized for different devices (the application gives a device's target,
    :func:`polyfuse.runtime.device.device_target`).
    """
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError:
        raise PolyfuseError("no such ONNX file", path) from None
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size,
           tuple(sorted((params or {}).items())), target, max_work_group_size, local_mem_size)
    hit = _LOADED.get(key)
    if hit is None:
        hit = _load_onnx_model(path, dict(params or {}), target, max_work_group_size,
                               local_mem_size)
        _LOADED.clear()  # one model at a time: a real-size model holds its weights
        _LOADED[key] = hit
    return hit


#: the last model loaded, by file version, parameters and target: a session predicts a model's
#: kernel forms and then fuses one of them, and both load it (seconds at real size)
_LOADED: dict[tuple, OnnxModel] = {}


#: the last file read, by file version and parameters: its checked and shape-inferred graph
#: without the bytes of its initializers, and the initializers as read-only arrays.  Both of a
#: session's kernel forms are translated from one read (checking and inferring a real-size
#: model takes seconds); the arrays are the weights the loaded model's data holds anyway.
_READ: dict[tuple, tuple[Any, dict[str, np.ndarray]]] = {}


def _read_graph(path: str, params: dict[str, int]) -> tuple[Any, dict[str, np.ndarray]]:
    """The model of ``path`` read, checked, its inputs fixed by ``params`` and its shapes
    inferred, and its initializers as arrays (the graph keeps their dims and types only)."""
    from onnx import numpy_helper

    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size, tuple(sorted(params.items())))
    hit = _READ.get(key)
    if hit is not None:
        return hit
    model = _read_model(path)
    _fix_inputs(model, params, path)
    model = _infer_shapes(model, path)
    arrays: dict[str, np.ndarray] = {}
    for init in model.graph.initializer:
        try:
            arrays[init.name] = numpy_helper.to_array(init)
        except (ValueError, TypeError) as err:
            raise PolyfuseError(f"initializer '{init.name}' cannot be read: "
                                f"{_first_line(err)}", path) from None
        arrays[init.name].flags.writeable = False
        init.ClearField("raw_data")
        for values in ("float_data", "int32_data", "int64_data", "double_data",
                       "uint64_data", "string_data"):
            init.ClearField(values)
    _READ.clear()  # one model at a time, as _LOADED
    _READ[key] = (model, arrays)
    return model, arrays


@dataclass(frozen=True)
class ProductCase:
    """A matrix product of a model as the operator library generates it for a target: enough
    to build and time its kernel alone with other register tiles
    (:mod:`polyfuse.runtime.product_tiles`)."""

    op: str
    attrs: Mapping[str, Any]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    #: ``(m, n, k, batch)``: the key of :attr:`~polyfuse.core.program.KernelVariant.tiles`
    product: tuple[int, int, int, int]


def product_cases(path: Union[str, os.PathLike], *, params: Optional[Mapping[str, int]] = None,
                  target: Target = REFERENCE_TARGET) -> list[ProductCase]:
    """The register-tiled matrix products of an ONNX model for ``target`` (its variant's
    ``register_tiled`` form), one per distinct shape, from shape inference alone (no kernel
    of the model is generated but theirs)."""
    from onnx import helper

    from polyfuse.oplib import op_kernel

    path = os.fspath(path)
    params = dict(params or {})
    model, _weights = _read_graph(path, params)
    shapes = {name: dims for name, dims in _inferred_shapes(model).items()
              if dims and all(d is not None for d in dims)}
    cases: dict[tuple[int, int, int, int], ProductCase] = {}
    for node in model.graph.node:
        if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
            continue
        ins = [shapes.get(name) for name in node.input if name]
        out = shapes.get(node.output[0])
        if out is None or any(s is None for s in ins):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        try:
            opk = op_kernel(node.op_type, attrs, ins, [out], name="product",
                            max_work_group_size=target.max_work_group_size,
                            local_mem_size=target.local_mem_size, variant=target.kernel)
        except PolyfuseError:
            continue  # the load reports it
        if opk.product is not None and opk.product not in cases:
            cases[opk.product] = ProductCase(node.op_type, attrs, tuple(ins), out, opk.product)
    return list(cases.values())


#: nodes that launch no kernel of their own (folded at load time, or views of their input)
_NO_LAUNCH = frozenset({"Constant", "Shape", "Identity", "Reshape", "Squeeze", "Unsqueeze",
                        "Flatten", "Dropout"})


def _inferred_shapes(model: Any) -> dict[str, tuple[Optional[int], ...]]:
    """Every value's shape after shape inference (None for a dimension it left unknown) and
    every initializer's."""
    shapes: dict[str, tuple[Optional[int], ...]] = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            shapes[vi.name] = tuple(int(d.dim_value) if d.HasField("dim_value") else None
                                    for d in vi.type.tensor_type.shape.dim)
    for t in model.graph.initializer:
        shapes[t.name] = tuple(int(d) for d in t.dims)
    return shapes


def model_work(path: Union[str, os.PathLike], *, params: Optional[Mapping[str, int]] = None
               ) -> Optional[tuple[float, int]]:
    """The FLOPs of an ONNX model's products (MatMul, Gemm, Conv: two per multiply-add) and
    the number of its nodes that launch a kernel, from shape inference alone: what a session
    weighs devices by (:func:`polyfuse.runtime.device.device_for_work`).  A dimension ONNX's
    inference leaves unknown is read off the other operand where the product fixes it (the
    reduced length, a batch dimension); None when one stays unknown."""
    path = os.fspath(path)
    model, _weights = _read_graph(path, dict(params or {}))
    shapes = _inferred_shapes(model)
    flops = 0.0
    launches = 0
    for node in model.graph.node:
        launches += node.op_type not in _NO_LAUNCH
        if node.op_type not in ("MatMul", "Gemm", "Conv") or len(node.input) < 2:
            continue
        a, b, out = (shapes.get(node.input[0]), shapes.get(node.input[1]),
                     shapes.get(node.output[0]))
        if a is None or b is None or out is None or not a or not b or not out:
            return None
        if node.op_type == "Conv":  # each output: a window of Cin/groups x kernel
            inner: Optional[int] = math.prod(b[1:]) if all(b[1:]) else None  # type: ignore[arg-type]
            sizes = list(out)
        else:  # the reduced length: A's columns (its rows under Gemm's transA), B's rows
            trans_a = any(at.name == "transA" and at.i for at in node.attribute)
            trans_b = any(at.name == "transB" and at.i for at in node.attribute)
            inner = ((a[-2] if trans_a and len(a) >= 2 else a[-1])
                     or (b[-1] if trans_b or len(b) < 2 else b[-2]))
            # an output dimension from the operands that fix it, aligned from the right: the
            # rows from A, the columns from B, a batch dimension the larger (broadcasting)
            rank = len(out)
            sizes = []
            for i in range(rank):
                ja, jb = i - rank + len(a), i - rank + len(b)
                fixed = [d for d in (a[ja] if 0 <= ja < len(a) - 1 else None,
                                     b[jb] if 0 <= jb < len(b) and jb != len(b) - 2 else None)
                         if d]
                sizes.append(out[i] or max(fixed, default=None))
        if inner is None or not all(sizes):
            return None
        flops += 2.0 * math.prod(sizes) * inner  # type: ignore[arg-type]
    return flops, launches


def _load_onnx_model(path: str, params: dict[str, int], target: Target,
                     max_work_group_size: Optional[int], local_mem_size: Optional[int]
                     ) -> OnnxModel:
    model, initializers = _read_graph(path, params)
    if max_work_group_size is None or local_mem_size is None:
        max_work_group_size = max_work_group_size or target.max_work_group_size
        local_mem_size = local_mem_size or target.local_mem_size
    tr = _Translator(model, path, int(max_work_group_size), int(local_mem_size),
                     "cl_khr_fp16" in target.extensions, target.kernel, initializers)
    inputs = tr.graph_inputs()
    for i, node in enumerate(model.graph.node):
        tr.node(i, node)
    outputs = tr.graph_outputs()
    name = _identifier(Path(path).stem, "model")
    program = tr.program(name)
    return OnnxModel(path=path, program=program, inputs=tuple(inputs), outputs=tuple(outputs),
                     nodes={k: v.text for k, v in tr.nodes.items()}, outcomes=dict(tr.nodes),
                     op_count=len(model.graph.node),
                     index_bounds={t.name: tr.index_bounds[t.name] for t in inputs
                                   if t.name in tr.index_bounds})


def load_onnx(path: Union[str, os.PathLike], *, params: Optional[Mapping[str, int]] = None,
              target: Target = REFERENCE_TARGET) -> Program:
    """The :class:`Program` of an ONNX model: one launch per computing node, weights in
    ``Program.data``, graph inputs written and outputs read by host ops."""
    return load_onnx_model(path, params=params, target=target).program


__all__ = ["ALIAS_OPS", "GraphIO", "OnnxModel", "ProductCase", "TensorInfo", "load_onnx",
           "load_onnx_model", "product_cases"]
