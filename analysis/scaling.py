"""How the cost of ``polyfuse fuse`` grows with model depth and tensor sizes.

BERT-style encoders (post-LN, as a PyTorch export of ``nn.TransformerEncoder`` is laid out:
Q/K/V MatMul + bias Add projections, Reshape/Transpose to heads, scaled Q·Kᵀ, Softmax, context
MatMul, Transpose/Reshape back, output projection, residual Adds, LayerNormalization, a ReLU FFN)
are generated with ``onnx.helper`` (random weights, no torch needed) at 1..12 layers and widths
64 and 768 (768: BERT-base, 12 heads, sequence 128, FFN 3072).  Every stage of the pipeline is
timed (load, build_uar, plan, generate, write) in CPU seconds of this process, with peak memory;
the growth exponent is the least-squares slope of log(total) against log(layers).  A cache hit
(second ``fuse`` of the same file through the disk cache) is timed too.

    python analysis/scaling.py [--layers 1 2 4 12] [--widths 64 768] [--out DIR]

Writes DIR/scaling.csv (default DIR: analysis/results) and prints the table and the path.
"""

from __future__ import annotations

import argparse
import csv
import math
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: width -> (hidden, heads, sequence, ffn)
SIZES = {64: (64, 4, 32, 256), 768: (768, 12, 128, 3072)}


class _Graph:
    """Nodes with unique names and float32 initializers from a seeded RNG."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def weight(self, name: str, shape: tuple[int, ...], scale: float = 0.0) -> str:
        scale = scale or 1.0 / math.sqrt(shape[0])
        data = (self.rng.random(shape, dtype=np.float32) * 2.0 - 1.0) * np.float32(scale)
        self.inits.append(numpy_helper.from_array(data, name))
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name


def _layer(g: _Graph, x: str, k: int, hidden: int, heads: int, seq: int, ffn: int) -> str:
    p = f"l{k}_"
    dh = hidden // heads
    to_heads = g.const(p + "heads_shape", np.array([1, seq, heads, dh], np.int64))
    to_model = g.const(p + "model_shape", np.array([1, seq, hidden], np.int64))
    branches = []
    for which, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        mm = g.op("MatMul", [x, g.weight(p + "W" + which, (hidden, hidden))], p + which + "_mm")
        add = g.op("Add", [mm, g.weight(p + "b" + which, (hidden,), 0.1)], p + which + "_add")
        rs = g.op("Reshape", [add, to_heads], p + which + "_reshape")
        branches.append(g.op("Transpose", [rs], p + which + "_transpose", perm=perm))
    q, kt, v = branches
    scores = g.op("MatMul", [q, kt], p + "scores")
    scaled = g.op("Div", [scores, g.const(p + "sqrt_dh", np.array(math.sqrt(dh), np.float32))],
                  p + "scale")
    probs = g.op("Softmax", [scaled], p + "softmax", axis=-1)
    ctx = g.op("MatMul", [probs, v], p + "context")
    ctx_t = g.op("Transpose", [ctx], p + "context_transpose", perm=[0, 2, 1, 3])
    ctx_m = g.op("Reshape", [ctx_t, to_model], p + "context_reshape")
    proj = g.op("MatMul", [ctx_m, g.weight(p + "Wo", (hidden, hidden))], p + "out_mm")
    proj_b = g.op("Add", [proj, g.weight(p + "bo", (hidden,), 0.1)], p + "out_add")
    res1 = g.op("Add", [proj_b, x], p + "residual1")
    ln1 = g.op("LayerNormalization", [res1, g.weight(p + "ln1_g", (hidden,), 1.0),
                                      g.weight(p + "ln1_b", (hidden,), 0.1)], p + "ln1",
               axis=-1, epsilon=1e-5)
    h1 = g.op("MatMul", [ln1, g.weight(p + "W1", (hidden, ffn))], p + "ffn1_mm")
    h1b = g.op("Add", [h1, g.weight(p + "b1", (ffn,), 0.1)], p + "ffn1_add")
    act = g.op("Relu", [h1b], p + "relu")
    h2 = g.op("MatMul", [act, g.weight(p + "W2", (ffn, hidden))], p + "ffn2_mm")
    h2b = g.op("Add", [h2, g.weight(p + "b2", (hidden,), 0.1)], p + "ffn2_add")
    res2 = g.op("Add", [h2b, ln1], p + "residual2")
    return g.op("LayerNormalization", [res2, g.weight(p + "ln2_g", (hidden,), 1.0),
                                       g.weight(p + "ln2_b", (hidden,), 0.1)], p + "ln2",
                axis=-1, epsilon=1e-5)


def bert_encoder(layers: int, width: int = 64, seed: int = 0) -> onnx.ModelProto:
    """A ``layers``-deep BERT-style encoder at ``width`` 64 (small) or 768 (BERT-base)."""
    hidden, heads, seq, ffn = SIZES[width]
    g = _Graph(seed)
    x = "X"
    for k in range(layers):
        x = _layer(g, x, k, hidden, heads, seq, ffn)
    g.nodes.append(helper.make_node("Identity", [x], ["Y"], name="output"))
    graph = helper.make_graph(
        g.nodes, f"bert{layers}x{width}",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, seq, hidden])], g.inits)
    model = helper.make_model(graph, producer_name="polyfuse-analysis",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def write_model(layers: int, width: int, out_dir: Path) -> Path:
    """Generate (once) and save the encoder; returns its path."""
    path = out_dir / f"bert{layers}x{width}.onnx"
    if not path.exists():
        onnx.save(bert_encoder(layers, width), str(path))
    return path


def _cpu() -> float:
    return time.process_time()


def time_stages(path: Path, out_dir: Path) -> dict[str, float]:
    """CPU seconds of each pipeline stage on one model (no disk cache), launches and memory."""
    from polyfuse.codegen import generate_fused
    from polyfuse.frontend.onnx import load_onnx_model
    from polyfuse.fusion import plan_fusion
    from polyfuse.fusion.reindex import clear_memo
    from polyfuse.passes.pipeline import FuseResult
    from polyfuse.report import write_outputs
    from polyfuse.uar import build_uar

    clear_memo()  # each model cold, as in a fresh ``polyfuse fuse`` process
    row: dict[str, float] = {}
    t = _cpu()
    model = load_onnx_model(str(path))
    row["load"], t = _cpu() - t, _cpu()
    uar = build_uar(model.program)
    row["build_uar"], t = _cpu() - t, _cpu()
    plan = plan_fusion(uar)
    row["plan"], t = _cpu() - t, _cpu()
    fused = generate_fused(plan)
    row["generate"], t = _cpu() - t, _cpu()
    write_outputs(FuseResult(program=model.program, uar=uar, plan=fused.plan, fused=fused),
                  out_dir / path.stem)
    row["write"] = _cpu() - t
    row["total"] = sum(row[k] for k in ("load", "build_uar", "plan", "generate", "write"))
    row["launches_before"] = fused.plan.launches_before
    row["launches_after"] = fused.launches_after
    row["nodes"] = len(onnx.load(str(path), load_external_data=False).graph.node)
    return row


def time_cli(path: Path, out_dir: Path, *extra: str) -> float:
    """Wall seconds of one ``polyfuse fuse`` run in a fresh process."""
    import subprocess

    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "polyfuse", "-q", "fuse", str(path), "--out",
                    str(out_dir), "--no-timing", *extra], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def _peak_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


def exponent(xs: list[float], ys: list[float]) -> Optional[float]:
    """Least-squares slope of log(y) against log(x) (None with fewer than two sizes)."""
    if len(set(xs)) < 2:
        return None
    lx, ly = np.log(np.asarray(xs)), np.log(np.asarray(ys))
    return float(np.polyfit(lx, ly, 1)[0])


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 2, 4, 12])
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 768], choices=sorted(SIZES))
    ap.add_argument("--models", type=Path, default=None,
                    help="where generated models are kept (default: a temporary directory)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--no-cli", action="store_true",
                    help="skip the end-to-end and cache-hit runs of the polyfuse command")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.TemporaryDirectory()
    models = args.models or Path(tmp.name)
    models.mkdir(parents=True, exist_ok=True)
    work = Path(tmp.name) / "out"
    rows = []
    for width in args.widths:
        for layers in args.layers:
            path = write_model(layers, width, models)
            print(f"scaling: {path.name} ...", file=sys.stderr, flush=True)
            row = {"width": width, "layers": layers, **time_stages(path, work)}
            if not args.no_cli:
                cache = Path(tmp.name) / f"cache{layers}x{width}"
                import os

                os.environ["XDG_CACHE_HOME"] = str(cache)
                row["cli_cold_s"] = time_cli(path, work)
                row["cli_cache_hit_s"] = time_cli(path, work)
                row["cli_peak_mib"] = _peak_mib(resource.RUSAGE_CHILDREN)
            row["peak_mib"] = _peak_mib(resource.RUSAGE_SELF)
            rows.append(row)
    keys = ["width", "layers", "nodes", "launches_before", "launches_after", "load",
            "build_uar", "plan", "generate", "write", "total", "peak_mib"]
    if not args.no_cli:
        keys += ["cli_cold_s", "cli_cache_hit_s", "cli_peak_mib"]
    csv_path = args.out / "scaling.csv"
    with open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k])
                                for k in keys) + " |")
    for width in args.widths:
        sel = [r for r in rows if r["width"] == width]
        e = exponent([r["layers"] for r in sel], [r["total"] for r in sel])
        if e is not None:
            print(f"width {width}: growth exponent of total over layers = {e:.2f}")
    print(f"wrote {csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
