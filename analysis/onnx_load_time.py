"""Loading long ONNX chains: operator kernels parsed one by one vs in one batch.

A chain of N element-wise nodes (PyTorch-style activations, five operator types, one shape) is
loaded with :func:`polyfuse.frontend.onnx.load_onnx_model`, which preprocesses and parses all
operator kernels in one batch and models kernels that differ only by name once.  The baseline
parses each operator kernel on its own (one ``gcc -E`` run and one pycparser parse per node, as
before issue 9).  The two are measured alternately, ``--repeat`` times, and the medians and the
spread (min..max) reported; the baseline is only run up to ``--baseline-max`` nodes because it
grows to minutes.

    python analysis/onnx_load_time.py [--sizes 50 200 2000] [--repeat 3] [--out DIR]

Writes ``DIR/onnx_load_time.md`` (default DIR ``analysis/results``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from polyfuse.frontend.onnx import load_onnx_model  # noqa: E402
from polyfuse.frontend.opencl import parse_kernels  # noqa: E402


def chain(n: int, path: Path) -> Path:
    ops = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs"]
    nodes, prev = [], "X"
    for k in range(n):
        out = "Y" if k == n - 1 else f"t{k}"
        nodes.append(helper.make_node(ops[k % len(ops)], [prev], [out], name=f"/layers.{k}/act"))
        prev = out
    graph = helper.make_graph(nodes, f"chain{n}",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def per_kernel(path: Path) -> float:
    """The baseline: every operator kernel through its own preprocessor run and parse."""
    model = load_onnx_model(path)
    start = time.perf_counter()
    for name, kernel in model.program.kernels.items():
        parse_kernels(kernel.source, f"<{name}>", context=kernel.context)
    return time.perf_counter() - start


def batch(path: Path) -> float:
    start = time.perf_counter()
    load_onnx_model(path)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 2000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline-max", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "analysis" / "results"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = chain(n, Path(tmp) / f"chain{n}.onnx")
            batch(path)  # warm-up: imports, device query
            new, old = [], []
            for _ in range(args.repeat):
                new.append(batch(path))
                if n <= args.baseline_max:
                    old.append(per_kernel(path))
            rows.append((n, new, old))
            med_old = f"{statistics.median(old):.2f}" if old else "-"
            print(f"{n} nodes: batch {statistics.median(new):.2f} s (model load), per-kernel "
                  f"parse {med_old} s (parsing only)", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["| nodes | whole load, batch parse (s) | spread | kernels parsed one by one "
             "(parsing alone, s) | spread |", "|---|---|---|---|---|"]
    for n, new, old in rows:
        spread_new = f"{min(new):.2f}..{max(new):.2f}"
        if old:
            lines.append(f"| {n} | {statistics.median(new):.2f} | {spread_new} | "
                         f"{statistics.median(old):.2f} | {min(old):.2f}..{max(old):.2f} |")
        else:
            lines.append(f"| {n} | {statistics.median(new):.2f} | {spread_new} | - | - |")
    (out / "onnx_load_time.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'onnx_load_time.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
