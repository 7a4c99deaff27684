"""Generate the bundled example ONNX models (deterministic: fixed seeds, onnx.helper only).

    .venv/bin/python examples/models/make_models.py [OUT_DIR]   # writes *.onnx next to this script

Every model is small (a 2-core CPU runs each in well under a second) but has the structure of the
real thing, so the front-end, the fusion planner and the verification against onnxruntime are
exercised on the graph shapes PyTorch exports: shape sub-graphs folded on the host, reshapes that
only re-view memory, tiled MatMuls with bias adds, reductions (Softmax, LayerNormalization), a
recurrent cell unrolled over time and a grouped convolution.  onnx.helper is used rather than a
PyTorch export so the files are byte-for-byte reproducible without torch installed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
#: IR version every model is saved with (opset <= 20 needs at most IR 9)
IR_VERSION = 9


class Graph:
    """A tiny graph builder: adds nodes with unique names and initializers from a seeded RNG."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._count = 0

    def input(self, name: str, shape: Sequence[object], dtype: int = TensorProto.FLOAT) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        return name

    def output(self, name: str, shape: Optional[Sequence[object]] = None,
               dtype: int = TensorProto.FLOAT) -> str:
        self.outputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def weight(self, name: str, shape: Sequence[int], scale: float = 0.0) -> str:
        """A float32 initializer, uniform in [-scale, scale] (default 1/sqrt(fan-in))."""
        scale = scale or 1.0 / np.sqrt(shape[0] if len(shape) == 1 else np.prod(shape[:-1]))
        data = (self.rng.uniform(-1.0, 1.0, size=shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(data, name))
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: Sequence[str], outputs: int | Sequence[str] = 1,
             name: str = "", domain: str = "", **attrs: object) -> list[str]:
        self._count += 1
        name = name or f"{op}_{self._count}"
        outs = ([f"{name}_out{i}" if i else f"{name}_out" for i in range(outputs)]
                if isinstance(outputs, int) else list(outputs))
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, domain=domain,
                                           **attrs))
        return outs

    def one(self, op: str, inputs: Sequence[str], name: str = "", out: str = "",
            **attrs: object) -> str:
        return self.node(op, inputs, [out] if out else 1, name=name, **attrs)[0]

    def save(self, opset: int, out_dir: Path) -> Path:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, producer_name="polyfuse-examples",
                                  opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        path = out_dir / f"{self.name}.onnx"
        onnx.save(model, str(path))
        return path


def qkv_branches(g: Graph, x: str, seq: int, hidden: int, heads: int,
                 shape: str, k_perm: Sequence[int] = (0, 2, 1, 3),
                 names: Sequence[str] = ("", "", "")) -> list[str]:
    """Q, K, V: MatMul + bias Add + Reshape to heads + Transpose (K may be transposed for Q·Kᵀ)."""
    outs = []
    for which, out in zip("qkv", names):
        w = g.weight(f"W{which}", (hidden, hidden))
        b = g.weight(f"b{which}", (hidden,), scale=0.1)
        mm = g.one("MatMul", [x, w], name=f"{which}_matmul")
        add = g.one("Add", [mm, b], name=f"{which}_bias")
        rs = g.one("Reshape", [add, shape], name=f"{which}_reshape")
        perm = list(k_perm) if which == "k" else [0, 2, 1, 3]
        outs.append(g.one("Transpose", [rs], name=f"{which}_transpose", out=out, perm=perm))
    return outs


def bert_qkv(out_dir: Path = HERE) -> Path:
    """BERT's QKV sub-graph: 3 × (MatMul + Add + Reshape + Transpose) = 12 ops."""
    seq, hidden, heads = 32, 64, 4
    g = Graph("bert_qkv", seed=1)
    x = g.input("X", [1, seq, hidden])
    shape = g.const("heads_shape", np.array([1, seq, heads, hidden // heads], np.int64))
    for name in qkv_branches(g, x, seq, hidden, heads, shape, names=("Q", "K", "V")):
        g.output(name, [1, heads, seq, hidden // heads])
    return g.save(opset=17, out_dir=out_dir)


def _gelu_erf(g: Graph, x: str, prefix: str) -> str:
    """x * 0.5 * (1 + erf(x / sqrt(2))), the form PyTorch exports before opset 20."""
    sqrt2 = g.const(f"{prefix}_sqrt2", np.array(np.sqrt(2.0), np.float32))
    one = g.const(f"{prefix}_one", np.array(1.0, np.float32))
    half = g.const(f"{prefix}_half", np.array(0.5, np.float32))
    d = g.one("Div", [x, sqrt2], name=f"{prefix}_div")
    e = g.one("Erf", [d], name=f"{prefix}_erf")
    a = g.one("Add", [e, one], name=f"{prefix}_add1")
    m = g.one("Mul", [x, a], name=f"{prefix}_mulx")
    return g.one("Mul", [m, half], name=f"{prefix}_mulhalf")


def bert_encoder(out_dir: Path = HERE) -> Path:
    """One small encoder layer as PyTorch exports it (shape sub-graph included)."""
    seq, hidden, heads, ffn = 16, 32, 2, 64
    dh = hidden // heads
    g = Graph("bert_encoder", seed=2)
    x = g.input("X", [1, seq, hidden])
    # the reshape target [1, S, heads, dh] computed from Shape(X): folded on the host
    shp = g.one("Shape", [x], name="shape_x")
    s_dim = g.one("Gather", [shp, g.const("one_idx", np.array(1, np.int64))], name="seq_len",
                  axis=0)
    s_vec = g.one("Unsqueeze", [s_dim, g.const("axes0", np.array([0], np.int64))],
                  name="seq_len_vec")
    heads_shape = g.one("Concat", [g.const("batch1", np.array([1], np.int64)), s_vec,
                                   g.const("heads_dh", np.array([heads, dh], np.int64))],
                        name="heads_shape", axis=0)
    merged_shape = g.one("Concat", [g.const("batch1b", np.array([1], np.int64)), s_vec,
                                    g.const("hidden_c", np.array([hidden], np.int64))],
                         name="merged_shape", axis=0)
    q, kt, v = qkv_branches(g, x, seq, hidden, heads, heads_shape, k_perm=(0, 2, 3, 1))
    scores = g.one("MatMul", [q, kt], name="scores")
    scaled = g.one("Div", [scores, g.const("sqrt_dh", np.array(np.sqrt(dh), np.float32))],
                   name="scale")
    probs = g.one("Softmax", [scaled], name="softmax", axis=-1)
    ctx = g.one("MatMul", [probs, v], name="context")
    ctx_t = g.one("Transpose", [ctx], name="context_transpose", perm=[0, 2, 1, 3])
    ctx_m = g.one("Reshape", [ctx_t, merged_shape], name="context_reshape")
    proj = g.one("MatMul", [ctx_m, g.weight("Wo", (hidden, hidden))], name="out_proj")
    proj_b = g.one("Add", [proj, g.weight("bo", (hidden,), 0.1)], name="out_bias")
    res1 = g.one("Add", [proj_b, x], name="residual1")
    ln1 = g.one("LayerNormalization", [res1, g.weight("ln1_g", (hidden,), 1.0),
                                       g.weight("ln1_b", (hidden,), 0.1)], name="ln1",
                axis=-1, epsilon=1e-5)
    h1 = g.one("MatMul", [ln1, g.weight("W1", (hidden, ffn))], name="ffn1")
    h1b = g.one("Add", [h1, g.weight("b1", (ffn,), 0.1)], name="ffn1_bias")
    act = _gelu_erf(g, h1b, "gelu")
    h2 = g.one("MatMul", [act, g.weight("W2", (ffn, hidden))], name="ffn2")
    h2b = g.one("Add", [h2, g.weight("b2", (hidden,), 0.1)], name="ffn2_bias")
    res2 = g.one("Add", [h2b, ln1], name="residual2")
    g.one("LayerNormalization", [res2, g.weight("ln2_g", (hidden,), 1.0),
                                 g.weight("ln2_b", (hidden,), 0.1)], name="ln2", out="Y",
          axis=-1, epsilon=1e-5)
    g.output("Y", [1, seq, hidden])
    return g.save(opset=17, out_dir=out_dir)


def lstm_unrolled(out_dir: Path = HERE) -> Path:
    """An LSTM cell unrolled over 3 time steps (opset 13: Split/Squeeze take tensor inputs)."""
    steps, batch, inp, hid = 3, 4, 16, 16
    g = Graph("lstm_unrolled", seed=3)
    x = g.input("X", [steps, batch, inp])
    h = g.input("H0", [batch, hid])
    c = g.input("C0", [batch, hid])
    wx = g.weight("Wx", (inp, 4 * hid))
    wh = g.weight("Wh", (hid, 4 * hid))
    b = g.weight("b", (4 * hid,), 0.1)
    split = g.const("gate_split", np.array([hid] * 4, np.int64))
    axes0 = g.const("axes0", np.array([0], np.int64))
    for t in range(steps):
        xs = g.one("Slice", [x, g.const(f"start{t}", np.array([t], np.int64)),
                             g.const(f"end{t}", np.array([t + 1], np.int64)), axes0],
                   name=f"t{t}_slice")
        xt = g.one("Squeeze", [xs, axes0], name=f"t{t}_squeeze")
        gx = g.one("MatMul", [xt, wx], name=f"t{t}_xproj")
        gh = g.one("MatMul", [h, wh], name=f"t{t}_hproj")
        gs = g.one("Add", [gx, gh], name=f"t{t}_gates")
        gb = g.one("Add", [gs, b], name=f"t{t}_bias")
        i_, f_, g_, o_ = g.node("Split", [gb, split], 4, name=f"t{t}_split", axis=1)
        i_ = g.one("Sigmoid", [i_], name=f"t{t}_input_gate")
        f_ = g.one("Sigmoid", [f_], name=f"t{t}_forget_gate")
        g_ = g.one("Tanh", [g_], name=f"t{t}_cell_gate")
        o_ = g.one("Sigmoid", [o_], name=f"t{t}_output_gate")
        fc = g.one("Mul", [f_, c], name=f"t{t}_fc")
        ig = g.one("Mul", [i_, g_], name=f"t{t}_ig")
        last = t == steps - 1
        c = g.one("Add", [fc, ig], name=f"t{t}_c", out="C" if last else "")
        tc = g.one("Tanh", [c], name=f"t{t}_tanh_c")
        h = g.one("Mul", [o_, tc], name=f"t{t}_h", out="H" if last else "")
    g.output("H", [batch, hid])
    g.output("C", [batch, hid])
    return g.save(opset=13, out_dir=out_dir)


def resnext_block(out_dir: Path = HERE) -> Path:
    """ResNeXt bottleneck: 1×1 conv, grouped 3×3 conv (groups=4), 1×1 conv, residual, Relu."""
    ch, size = 16, 8
    g = Graph("resnext_block", seed=4)
    x = g.input("X", [1, ch, size, size])
    c1 = g.one("Conv", [x, g.weight("W1", (ch, ch, 1, 1)), g.weight("B1", (ch,), 0.1)],
               name="conv1x1_a", kernel_shape=[1, 1])
    r1 = g.one("Relu", [c1], name="relu_a")
    c2 = g.one("Conv", [r1, g.weight("W2", (ch, ch // 4, 3, 3)), g.weight("B2", (ch,), 0.1)],
               name="conv3x3_grouped", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4)
    r2 = g.one("Relu", [c2], name="relu_b")
    c3 = g.one("Conv", [r2, g.weight("W3", (ch, ch, 1, 1)), g.weight("B3", (ch,), 0.1)],
               name="conv1x1_c", kernel_shape=[1, 1])
    s = g.one("Add", [c3, x], name="residual")
    g.one("Relu", [s], name="relu_out", out="Y")
    g.output("Y", [1, ch, size, size])
    return g.save(opset=13, out_dir=out_dir)


def mlp_gelu_ln(out_dir: Path = HERE) -> Path:
    """MatMul, Add, Gelu (the opset-20 operator), LayerNormalization, MatMul."""
    rows, dim, hid = 8, 32, 64
    g = Graph("mlp_gelu_ln", seed=5)
    x = g.input("X", [rows, dim])
    h = g.one("MatMul", [x, g.weight("W1", (dim, hid))], name="fc1")
    hb = g.one("Add", [h, g.weight("b1", (hid,), 0.1)], name="fc1_bias")
    a = g.one("Gelu", [hb], name="gelu")
    ln = g.one("LayerNormalization", [a, g.weight("ln_g", (hid,), 1.0),
                                      g.weight("ln_b", (hid,), 0.1)], name="ln", axis=-1)
    g.one("MatMul", [ln, g.weight("W2", (hid, dim))], name="fc2", out="Y")
    g.output("Y", [rows, dim])
    return g.save(opset=20, out_dir=out_dir)


MODELS = (bert_qkv, bert_encoder, lstm_unrolled, resnext_block, mlp_gelu_ln)


def main(argv: Sequence[str] = ()) -> int:
    out_dir = Path(argv[0]) if argv else HERE
    out_dir.mkdir(parents=True, exist_ok=True)
    for make in MODELS:
        path = make(out_dir)
        model = onnx.load(str(path))
        print(f"{path}: {len(model.graph.node)} ops")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
